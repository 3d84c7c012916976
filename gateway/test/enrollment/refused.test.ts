import { describe, expect, it } from 'vitest';
import { RefusedDevices } from '../../src/enrollment/refused.js';

describe('RefusedDevices: a bounded, throttled record of devices refused at connect', () => {
  it('keeps the most recent N ids, counts tries, says when a log line is due (once per id per interval), forgets a device that gets in', () => {
    let now = 1000;
    const r = new RefusedDevices({ max: 2, logIntervalMs: 60_000, now: () => now });
    const base = { clientId: 'c', transport: 'websocket' as const, reason: 'missing_token', remoteAddress: '10.0.0.9' };
    const due: Array<[string, number | undefined]> = [];
    const rec = (deviceId: string) => due.push([deviceId, r.record({ deviceId, ...base })?.refusals]);
    for (let i = 0; i < 5; i++) rec('aa:00:00:00:00:01');
    now += 61_000;
    rec('aa:00:00:00:00:01');
    rec('aa:00:00:00:00:02');
    rec('aa:00:00:00:00:03');
    expect(r.list().map((d) => d.deviceId)).toEqual(['aa:00:00:00:00:03', 'aa:00:00:00:00:02']);
    rec('aa:00:00:00:00:02');
    expect(r.list()[0]).toMatchObject({ deviceId: 'aa:00:00:00:00:02', count: 2, firstAt: 62_000, lastAt: 62_000 });
    // device 1: its first try, then one line after the interval summing the 5 since; 2 and 3 once each
    expect(due.filter(([, n]) => n !== undefined)).toEqual([
      ['aa:00:00:00:00:01', 1],
      ['aa:00:00:00:00:01', 5],
      ['aa:00:00:00:00:02', 1],
      ['aa:00:00:00:00:03', 1],
    ]);
    r.forget('aa:00:00:00:00:02');
    expect(r.list().map((d) => d.deviceId)).toEqual(['aa:00:00:00:00:03']);
  });
});
