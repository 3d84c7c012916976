import { describe, expect, it } from 'vitest';
import { MAX_CRON_LENGTH, parseTiming } from '../../src/fleet/schedules-timing.js';
import { GatewayError } from '../../src/errors.js';

const at = (iso: string) => Date.parse(iso);
const refusal = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(GatewayError);
    expect((e as GatewayError).code).toBe('INVALID_REQUEST');
    return (e as Error).message;
  }
  throw new Error('not refused');
};

describe('parseTiming', () => {
  it('runs a cron in UTC by default: the next run strictly after, the latest at or before', () => {
    const c = parseTiming({ cron: '30 8 * * *' });
    expect(c.once).toBeUndefined();
    expect(c.nextAfter(at('2027-01-23T08:00:00Z'))).toBe(at('2027-01-23T08:30:00Z'));
    expect(c.nextAfter(at('2027-01-23T08:30:00Z'))).toBe(at('2027-01-24T08:30:00Z'));
    expect(c.latestAtOrBefore(at('2027-01-23T08:30:00Z'))).toBe(at('2027-01-23T08:30:00Z'));
    expect(c.latestAtOrBefore(at('2027-01-23T08:29:59Z'))).toBe(at('2027-01-22T08:30:00Z'));
  });

  it('runs a cron in its time zone, daylight saving included', () => {
    const paris = parseTiming({ cron: '0 9 * * *', timeZone: 'Europe/Paris' });
    expect(paris.nextAfter(at('2027-01-10T00:00:00Z'))).toBe(at('2027-01-10T08:00:00Z')); // winter: UTC+1
    expect(paris.nextAfter(at('2027-07-10T00:00:00Z'))).toBe(at('2027-07-10T07:00:00Z')); // summer: UTC+2
    expect(parseTiming({ cron: '@daily' }).nextAfter(at('2027-01-10T12:00:00Z'))).toBe(at('2027-01-11T00:00:00Z'));
  });

  it('runs a one-off once, at its instant with its offset', () => {
    const o = parseTiming({ at: '2027-01-23T09:00:00+01:00' });
    expect(o.once).toBe(at('2027-01-23T08:00:00Z'));
    expect(o.nextAfter(at('2027-01-23T07:59:59Z'))).toBe(o.once);
    expect(o.nextAfter(o.once!)).toBeNull();
    expect(o.latestAtOrBefore(o.once! - 1)).toBeNull();
    expect(o.latestAtOrBefore(o.once!)).toBe(o.once);
  });

  it('refuses neither or both of cron and at, and a time zone with at', () => {
    expect(refusal(() => parseTiming({}))).toMatch(/exactly one of "cron"/);
    expect(refusal(() => parseTiming({ cron: '* * * * *', at: '2027-01-23T08:00:00Z' }))).toMatch(/exactly one/);
    expect(refusal(() => parseTiming({ at: '2027-01-23T08:00:00Z', timeZone: 'UTC' }))).toMatch(/"timeZone" goes with "cron"/);
  });

  it('refuses a seconds field, nonsense, an over-long cron and one that never runs', () => {
    expect(refusal(() => parseTiming({ cron: '*/5 * * * * *' }))).toMatch(/not a five-field cron expression/);
    expect(refusal(() => parseTiming({ cron: 'every day' }))).toMatch(/not a five-field cron expression/);
    expect(refusal(() => parseTiming({ cron: `0 0 * * ${'1,'.repeat(MAX_CRON_LENGTH)}1` }))).toMatch(/longer than 128 characters/);
    expect(refusal(() => parseTiming({ cron: '0 0 30 2 *' }))).toMatch(/never runs/);
  });

  it('refuses a time zone that is not IANA, or too long', () => {
    expect(refusal(() => parseTiming({ cron: '0 9 * * *', timeZone: 'Mars/Olympus' }))).toMatch(/not an IANA time zone/);
    expect(refusal(() => parseTiming({ cron: '0 9 * * *', timeZone: 'x'.repeat(65) }))).toMatch(/longer than 64/);
  });

  it('refuses an at without an offset, or naming a date that does not exist', () => {
    for (const s of ['2027-01-23T08:00:00', '2027-01-23', 'tomorrow', '2027-01-23 08:00:00Z'])
      expect([s, refusal(() => parseTiming({ at: s }))]).toEqual([s, expect.stringMatching(/not an ISO 8601 time with an offset/)]);
    expect(refusal(() => parseTiming({ at: '2027-02-30T08:00:00Z' }))).toMatch(/does not exist/);
    expect(refusal(() => parseTiming({ at: '2027-01-23T24:00:00Z' }))).toMatch(/does not exist|not an ISO 8601/);
  });
});
