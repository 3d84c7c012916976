import { describe, expect, it } from 'vitest';
import type { FirmwareRolloutConfig } from '../../src/firmware/config.js';
import { deviceFacts, pickRollout, rolloutBucket } from '../../src/firmware/rollout.js';

const rollout = (o: Partial<FirmwareRolloutConfig>): FirmwareRolloutConfig => ({ version: '2.0.0', url: 'fw-2.0.0.bin', percent: 0, ...o }) as FirmwareRolloutConfig;
const id = (n: number) => `02:00:00:00:${(n >> 8).toString(16).padStart(2, '0')}:${(n & 0xff).toString(16).padStart(2, '0')}`;

describe('deviceFacts', () => {
  it('reads the version and boards from the OTA body, the User-Agent filling in', () => {
    expect(deviceFacts('bread-compact-wifi/1.6.2', { application: { version: '1.7.0' }, board: { type: 'esp-box', name: 'esp-box-3' } })).toEqual({
      version: '1.7.0',
      boards: ['esp-box', 'esp-box-3', 'bread-compact-wifi'],
    });
    expect(deviceFacts('bread-compact-wifi/1.6.2 extra', {})).toEqual({ version: '1.6.2', boards: ['bread-compact-wifi'] });
    // The same name twice is listed once.
    expect(deviceFacts('esp-box/1.0', { board: { type: 'esp-box' } }).boards).toEqual(['esp-box']);
  });

  it('ignores what is malformed, over-long or of the wrong type, never throwing', () => {
    expect(deviceFacts(undefined, undefined)).toEqual({ version: undefined, boards: [] });
    expect(deviceFacts('not a ua', 'not an object')).toEqual({ version: undefined, boards: [] });
    expect(deviceFacts(undefined, { application: { version: 7 }, board: { type: 'x'.repeat(129), name: ['a'] } })).toEqual({ version: undefined, boards: [] });
    expect(deviceFacts(`${'b'.repeat(129)}/1.0`, { application: { version: 'v'.repeat(65) } })).toEqual({ version: undefined, boards: [] });
    expect(deviceFacts(undefined, { application: null, board: 5 })).toEqual({ version: undefined, boards: [] });
  });
});

describe('rolloutBucket and pickRollout', () => {
  it('puts a device in a stable bucket in [0, 100), spread over the fleet', () => {
    expect(rolloutBucket(id(1))).toBe(rolloutBucket(id(1)));
    const buckets = Array.from({ length: 2000 }, (_, n) => rolloutBucket(id(n)));
    expect(buckets.every((b) => b >= 0 && b < 100)).toBe(true);
    const under10 = buckets.filter((b) => b < 10).length / buckets.length;
    expect(under10).toBeGreaterThan(0.06);
    expect(under10).toBeLessThan(0.14);
  });

  it('keeps a device in a rollout as its share grows', () => {
    const fleet = Array.from({ length: 500 }, (_, n) => id(n));
    const at10 = fleet.filter((d) => pickRollout([rollout({ percent: 10 })], d, { version: undefined, boards: [] }));
    const at20 = new Set(fleet.filter((d) => pickRollout([rollout({ percent: 20 })], d, { version: undefined, boards: [] })));
    expect(at10.length).toBeGreaterThan(0);
    expect(at10.every((d) => at20.has(d))).toBe(true);
    expect(fleet.every((d) => pickRollout([rollout({ percent: 100 })], d, { version: undefined, boards: [] }))).toBe(true);
    expect(fleet.some((d) => pickRollout([rollout({ percent: 0 })], d, { version: undefined, boards: [] }))).toBe(false);
  });

  it('always covers listed devices, only on listed boards when boards are given, first match first', () => {
    const listed = rollout({ version: '3.0.0', devices: [id(7)] });
    const boxOnly = rollout({ version: '2.5.0', percent: 100, boards: ['esp-box'] });
    const everyone = rollout({ version: '2.0.0', percent: 100 });
    const facts = (boards: string[]) => ({ version: '1.0.0', boards });
    expect(pickRollout([listed, boxOnly, everyone], id(7), facts([]))?.version).toBe('3.0.0');
    expect(pickRollout([listed, boxOnly, everyone], id(8), facts(['esp-box']))?.version).toBe('2.5.0');
    expect(pickRollout([listed, boxOnly, everyone], id(8), facts(['bread-compact-wifi']))?.version).toBe('2.0.0');
    // A listed device on another board than the rollout's is not covered.
    expect(pickRollout([rollout({ devices: [id(7)], boards: ['esp-box'] })], id(7), facts(['other']))).toBeUndefined();
    expect(pickRollout([], id(7), facts([]))).toBeUndefined();
  });
});
