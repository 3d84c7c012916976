import { describe, expect, it } from 'vitest';
import type { FirmwareRolloutConfig } from '../../src/firmware/config.js';
import { deviceFacts, pickRollout, rolloutBucket } from '../../src/firmware/rollout.js';

const mac = (i: number) =>
  `02:00:00:${((i >> 16) & 0xff).toString(16).padStart(2, '0')}:${((i >> 8) & 0xff).toString(16).padStart(2, '0')}:${(i & 0xff).toString(16).padStart(2, '0')}`;
const FLEET = Array.from({ length: 4000 }, (_, i) => mac(i));
const facts = { version: '1.0.0', boards: ['voxgate-devkit'] };
const ownRollout = (o: Partial<FirmwareRolloutConfig>): FirmwareRolloutConfig => ({ version: '2.0.0', url: 'fw-2.0.0.bin', percent: 0, ...o }) as FirmwareRolloutConfig;
const id = (n: number) => `02:00:00:00:${(n >> 8).toString(16).padStart(2, '0')}:${(n & 0xff).toString(16).padStart(2, '0')}`;
const rollout = (over: Record<string, unknown> = {}) => ({ version: '1.1.0', url: 'fw.bin', percent: 10, ...over });

describe('rollout selection', () => {
  it('takes a stable share of the fleet that only grows with the percentage', () => {
    for (const id of FLEET.slice(0, 50)) {
      const b = rolloutBucket(id);
      expect(b).toBe(rolloutBucket(id));
      expect(b).toBeGreaterThanOrEqual(0);
      expect(b).toBeLessThan(100);
    }
    const at10 = new Set(FLEET.filter((id) => pickRollout([rollout({ percent: 10 })], id, facts)));
    const at25 = new Set(FLEET.filter((id) => pickRollout([rollout({ percent: 25 })], id, facts)));
    // A hash of the id spreads the fleet: about 10 % and 25 % (4000 fixed ids, so this never flakes).
    expect(at10.size).toBeGreaterThan(320);
    expect(at10.size).toBeLessThan(480);
    expect(at25.size).toBeGreaterThan(880);
    expect(at25.size).toBeLessThan(1120);
    for (const id of at10) expect(at25.has(id)).toBe(true);
    expect(FLEET.filter((id) => pickRollout([rollout({ percent: 0 })], id, facts))).toEqual([]);
    expect(FLEET.filter((id) => pickRollout([rollout({ percent: 100 })], id, facts)).length).toBe(FLEET.length);
  });

  it('always includes listed devices, and only matching boards when boards are given', () => {
    const outside = FLEET.find((id) => rolloutBucket(id) >= 50)!;
    expect(pickRollout([rollout({ percent: 0, devices: [outside] })], outside, facts)?.version).toBe('1.1.0');
    expect(pickRollout([rollout({ percent: 100, boards: ['other-board'] })], outside, facts)).toBeUndefined();
    const perBoard = [
      rollout({ version: '2.0.0', percent: 100, boards: ['other-board'] }),
      rollout({ version: '1.1.0', percent: 100, boards: ['voxgate-devkit'] }),
    ];
    expect(pickRollout(perBoard, outside, facts)?.version).toBe('1.1.0');
    expect(pickRollout(perBoard, outside, { version: undefined, boards: ['other-board'] })?.version).toBe('2.0.0');
  });

  it('reads the version and board from the OTA body and the User-Agent, ignoring junk', () => {
    expect(deviceFacts('voxgate-devkit/1.0.0', {})).toEqual({ version: '1.0.0', boards: ['voxgate-devkit'] });
    expect(deviceFacts('bread-compact-wifi/1.7.6', { application: { version: '1.7.7' }, board: { type: 'bread-compact-wifi', name: 'x' } })).toEqual({
      version: '1.7.7',
      boards: ['bread-compact-wifi', 'x'],
    });
    expect(deviceFacts(undefined, { application: { version: 'v'.repeat(10_000) }, board: { type: ['a'] } })).toEqual({ version: undefined, boards: [] });
    expect(deviceFacts('Mozilla/5.0 (X11)', [1, 2])).toEqual({ version: '5.0', boards: ['Mozilla'] });
    expect(deviceFacts('../../etc', null)).toEqual({ version: undefined, boards: [] });
  });
  it('ignores what is malformed, over-long or of the wrong type, never throwing', () => {
    expect(deviceFacts(undefined, undefined)).toEqual({ version: undefined, boards: [] });
    expect(deviceFacts('not a ua', 'not an object')).toEqual({ version: undefined, boards: [] });
    expect(deviceFacts(undefined, { application: { version: 7 }, board: { type: 'x'.repeat(129), name: ['a'] } })).toEqual({ version: undefined, boards: [] });
    expect(deviceFacts(`${'b'.repeat(129)}/1.0`, { application: { version: 'v'.repeat(65) } })).toEqual({ version: undefined, boards: [] });
    expect(deviceFacts(undefined, { application: null, board: 5 })).toEqual({ version: undefined, boards: [] });
  });

  it('always covers listed devices, only on listed boards when boards are given, first match first', () => {
    const listed = ownRollout({ version: '3.0.0', devices: [id(7)] });
    const boxOnly = ownRollout({ version: '2.5.0', percent: 100, boards: ['esp-box'] });
    const everyone = ownRollout({ version: '2.0.0', percent: 100 });
    const facts = (boards: string[]) => ({ version: '1.0.0', boards });
    expect(pickRollout([listed, boxOnly, everyone], id(7), facts([]))?.version).toBe('3.0.0');
    expect(pickRollout([listed, boxOnly, everyone], id(8), facts(['esp-box']))?.version).toBe('2.5.0');
    expect(pickRollout([listed, boxOnly, everyone], id(8), facts(['bread-compact-wifi']))?.version).toBe('2.0.0');
    // A listed device on another board than the rollout's is not covered.
    expect(pickRollout([ownRollout({ devices: [id(7)], boards: ['esp-box'] })], id(7), facts(['other']))).toBeUndefined();
    expect(pickRollout([], id(7), facts([]))).toBeUndefined();
  });
});
