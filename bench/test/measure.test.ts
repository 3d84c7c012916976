/**
 * How the call and voice rows put their slices together (bench/scenarios/measure.ts, bench/lib/load.ts,
 * bench/lib/voice.ts): the order the sides run in, and one side's slices summed into one run.
 */
import { describe, expect, it } from 'vitest';
import type { LoadResult } from '../lib/load.js';
import { mergeLoads } from '../lib/load.js';
import { pooled, quantile } from '../lib/samples.js';
import { mergeVoiceLoads, type VoiceLoadResult } from '../lib/voice.js';
import { alternating, mergeMeasured, residentRatio, type MeasuredLoad } from '../scenarios/measure.js';

const load = (ok: number, seconds: number, latencies: number[], codes: Record<string, number> = { '200': ok }): LoadResult => ({
  ok,
  non2xx: 0,
  errors: 0,
  timeouts: 0,
  seconds,
  perSecond: ok / seconds,
  p50: NaN,
  p99: NaN,
  statusCodes: codes,
  latencies: Float64Array.from(latencies).sort(),
});

describe('alternating', () => {
  it('runs two sides A B B A A B B A, each told its slice number', async () => {
    const order: string[] = [];
    const side = (name: string) => async (k: number) => (order.push(`${name}${k}`), `${name}${k}`);
    const out = await alternating([side('a'), side('b')], 4);
    expect(order).toEqual(['a0', 'b0', 'b1', 'a1', 'a2', 'b2', 'b3', 'a3']);
    expect(out).toEqual([
      ['a0', 'a1', 'a2', 'a3'],
      ['b0', 'b1', 'b2', 'b3'],
    ]);
  });

  it('mirrors three sides (A B C C B A) and runs each once when asked for one slice', async () => {
    const order: string[] = [];
    const side = (name: string) => async () => void order.push(name);
    await alternating([side('a'), side('b'), side('c')], 2);
    expect(order).toEqual(['a', 'b', 'c', 'c', 'b', 'a']);
    order.length = 0;
    await alternating([side('a'), side('b')], 1);
    expect(order).toEqual(['a', 'b']);
  });
});

describe('mergeLoads', () => {
  it('sums calls and seconds, takes the rate over the summed time and the percentiles over every latency', () => {
    const m = mergeLoads([load(4, 1, [1, 2, 3, 4]), load(6, 2, [10, 20, 30, 40, 50, 60], { '200': 6, '500': 1 })]);
    expect(m.ok).toBe(10);
    expect(m.seconds).toBe(3);
    expect(m.perSecond).toBeCloseTo(10 / 3);
    expect(Array.from(m.latencies)).toEqual([1, 2, 3, 4, 10, 20, 30, 40, 50, 60]);
    expect(m.p50).toBe(20);
    expect(m.p99).toBe(60);
    expect(m.statusCodes).toEqual({ '200': 10, '500': 1 });
  });
});

describe('mergeMeasured', () => {
  const measured = (r: LoadResult, cpuUs: number, otherUs: number, l: [number, number]): MeasuredLoad => ({
    ...r,
    cpuUs,
    cpuUsPerCall: cpuUs / r.ok,
    otherThreadsUs: otherUs,
    otherThreadsUsPerCall: otherUs / r.ok,
    load: l,
  });

  it('gives CPU per call over the summed calls (not the mean of the slices) and the load from first start to last end', () => {
    const m = mergeMeasured([measured(load(100, 1, [1]), 10_000, 1_000, [1.5, 2]), measured(load(300, 1, [2]), 60_000, 0, [2.5, 3])]);
    expect(m.cpuUsPerCall).toBeCloseTo(70_000 / 400);
    expect(m.otherThreadsUsPerCall).toBeCloseTo(1_000 / 400);
    expect(m.load).toEqual([1.5, 3]);
    expect(m.perSecond).toBe(200);
  });

  it('returns a single slice as it is', () => {
    const one = measured(load(10, 1, [1, 2]), 500, 0, [1, 1]);
    expect(mergeMeasured([one])).toBe(one);
  });
});

describe('mergeVoiceLoads', () => {
  const voice = (received: number, seconds: number, rtts: number[], lost = 0): VoiceLoadResult => ({
    devices: 10,
    connectFailures: 0,
    sent: received + lost,
    received,
    lost,
    corrupt: 0,
    seconds,
    perSecond: received / seconds,
    p50: NaN,
    p99: NaN,
    rtts: Float64Array.from(rtts).sort(),
  });

  it('sums frames, losses and seconds, and takes the percentiles over every echo', () => {
    const m = mergeVoiceLoads([voice(3, 1.5, [5, 1, 3], 1), voice(2, 0.5, [4, 2])]);
    expect(m).toMatchObject({ devices: 10, sent: 6, received: 5, lost: 1, seconds: 2, perSecond: 2.5, p50: 3, p99: 5 });
    expect(Array.from(m.rtts)).toEqual([1, 2, 3, 4, 5]);
  });
});

describe('samples', () => {
  it('pools runs into one sorted array and reads a quantile by rank (NaN for none)', () => {
    const all = pooled([Float64Array.from([3, 1]), [2], []]);
    expect(Array.from(all)).toEqual([1, 2, 3]);
    expect(quantile(all, 0.5)).toBe(2);
    expect(quantile(all, 1)).toBe(3);
    expect(quantile(new Float64Array(0), 0.5)).toBeNaN();
  });
});

describe('residentRatio', () => {
  it("compares resident memory per session when both sides' RSS grew by at least what their sessions hold", () => {
    expect(residentRatio({ rss: 55_000, live: 10_000 }, { rss: 64_000, live: 16_000 })).toEqual({ ratio: 0.859, liveRatio: 0.625, note: undefined });
  });

  it('gives no resident ratio, only the live one, when a side served its sessions from pages it already had', () => {
    const ours = residentRatio({ rss: 68_000, live: 9_800 }, { rss: -491, live: 8_346 });
    expect(ours.ratio).toBeNull();
    expect(ours.liveRatio).toBe(1.174);
    expect(ours.note).toMatch(/did not resolve/);
    expect(residentRatio({ rss: 4_000, live: 9_800 }, { rss: 60_000, live: 8_346 }).ratio).toBeNull();
  });
});
