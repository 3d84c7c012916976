import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { frameCost, MAX_HELD_FRAMES, ReadBudget, type ReadBudgetDeps } from '../../src/devices/read-budget.js';
import { SourceReadBudgets, type SourceShare } from '../../src/devices/source-read-budgets.js';

/** A budget over recorded deps: what was handled, in order, and how often the link was paused and resumed. */
function budgetOf(limit: { ratePerSecond: number; burst: number }, solicited: (text: string) => boolean = () => false, source?: SourceShare) {
  const seen: string[] = [];
  const calls = { pause: 0, resume: 0, paused: 0, dropped: 0, failed: [] as unknown[], by: [] as string[] };
  const deps: ReadBudgetDeps = {
    pauseReading: () => void calls.pause++,
    resumeReading: () => void calls.resume++,
    handleText: (text) => {
      if (text === 'throw') throw new Error('boom');
      seen.push(text);
      return solicited(text);
    },
    handleAudio: (data) => {
      seen.push(`audio:${data.toString()}`);
      return !data.toString().startsWith('stray');
    },
    paused: (by) => {
      calls.paused++;
      calls.by.push(by);
    },
    dropped: (n) => void (calls.dropped += n),
    failed: (err) => void calls.failed.push(err),
  };
  const budget = new ReadBudget(limit, deps, () => Date.now(), source);
  /** What a session does with one frame from the link. */
  const frame = (text: string) => {
    if (budget.paused) return budget.hold(text);
    if (!deps.handleText(text)) budget.spend(frameCost(text.length));
  };
  return { budget, seen, calls, frame };
}

describe('ReadBudget: a device past its unsolicited-frame budget is paused, not dropped', () => {
  beforeEach(() => void vi.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => void vi.useRealTimers());

  it('lets the burst through, then pauses reading once and holds what the link still hands over', () => {
    const { budget, seen, calls, frame } = budgetOf({ ratePerSecond: 10, burst: 5 });
    for (let i = 0; i < 5; i++) frame(`n${i}`);
    expect(calls.pause).toBe(0);
    expect(budget.paused).toBe(false);
    frame('n5'); // the sixth: handled (it was read), and the link stops
    expect(seen).toEqual(['n0', 'n1', 'n2', 'n3', 'n4', 'n5']);
    expect(calls).toMatchObject({ pause: 1, paused: 1, resume: 0 });
    for (let i = 6; i < 10; i++) frame(`n${i}`);
    expect(seen).toHaveLength(6);
    expect(budget.waiting).toBe(4);
  });

  it('hands held frames over in order at the rate, audio among them, and resumes reading once none waits', () => {
    const { budget, seen, calls, frame } = budgetOf({ ratePerSecond: 10, burst: 1 });
    frame('a');
    frame('b'); // over: paused for the deficit (100 ms)
    expect(calls.pause).toBe(1);
    frame('c');
    budget.hold(Buffer.from('pcm'));
    frame('d');
    vi.advanceTimersByTime(99);
    expect(seen).toEqual(['a', 'b']);
    vi.advanceTimersByTime(1); // one frame's worth back: c, which spends it again, and the link stays paused
    expect(seen).toEqual(['a', 'b', 'c']);
    expect(calls.resume).toBe(0);
    vi.advanceTimersByTime(100); // the audio (free) and d, in the order they came
    expect(seen).toEqual(['a', 'b', 'c', 'audio:pcm', 'd']);
    // d spent past the budget: reading stays paused until it is paid for, then resumes
    expect(calls.resume).toBe(0);
    vi.advanceTimersByTime(100);
    expect(calls).toMatchObject({ pause: 1, resume: 1, dropped: 0 });
    expect(budget.paused).toBe(false);
    expect(budget.waiting).toBe(0);
  });

  it('counts held audio that no voice session takes, as it counts unsolicited text', () => {
    const { budget, seen, calls, frame } = budgetOf({ ratePerSecond: 10, burst: 1 });
    frame('a');
    frame('b');
    budget.hold(Buffer.from('stray1'));
    budget.hold(Buffer.from('stray2'));
    vi.advanceTimersByTime(100);
    expect(seen).toEqual(['a', 'b', 'audio:stray1']);
    vi.advanceTimersByTime(100);
    expect(seen).toEqual(['a', 'b', 'audio:stray1', 'audio:stray2']);
    expect(calls.resume).toBe(0);
    vi.advanceTimersByTime(100);
    expect(calls.resume).toBe(1);
  });

  it('counts a frame once per 4 KiB it holds: parsing is per byte', () => {
    expect([0, 100, 4095, 4096, 60_000, 65_536].map(frameCost)).toEqual([1, 1, 1, 2, 15, 17]);
    const { calls, seen, frame } = budgetOf({ ratePerSecond: 10, burst: 30 });
    frame('x'.repeat(60_000)); // 15
    frame('y'.repeat(50_000)); // 13: 28 spent
    expect(calls.pause).toBe(0);
    frame('z'.repeat(12_000)); // 3: past the burst
    expect(calls.pause).toBe(1);
    frame('held');
    vi.advanceTimersByTime(99);
    expect(seen).toHaveLength(3);
    vi.advanceTimersByTime(1); // the deficit of 1 refilled after 100 ms
    expect(seen).toHaveLength(4);
  });

  it('does not count solicited frames (replies to the gateway) against the budget', () => {
    const { calls, seen, frame } = budgetOf({ ratePerSecond: 1, burst: 2 }, (t) => t.startsWith('reply'));
    for (let i = 0; i < 100; i++) frame(`reply${i}`);
    frame('n0');
    frame('n1');
    expect(calls.pause).toBe(0);
    frame('n2');
    expect(calls.pause).toBe(1);
    expect(seen).toHaveLength(103);
  });

  it('refills with time: a device within its rate is never paused', () => {
    const { calls, frame } = budgetOf({ ratePerSecond: 20, burst: 2 });
    for (let i = 0; i < 200; i++) {
      frame(`n${i}`);
      vi.advanceTimersByTime(50);
    }
    expect(calls.pause).toBe(0);
  });

  it('drops and counts past the hold bound (a link that kept handing frames over while paused)', () => {
    const { budget, calls, frame } = budgetOf({ ratePerSecond: 1, burst: 1 });
    frame('a');
    frame('b');
    for (let i = 0; i < MAX_HELD_FRAMES + 10; i++) frame(`h${i}`);
    expect(budget.waiting).toBe(MAX_HELD_FRAMES);
    expect(calls.dropped).toBe(10);
  });

  it('a held frame whose handler throws ends the connection through `failed`, never the timer', () => {
    const { budget, calls, frame } = budgetOf({ ratePerSecond: 10, burst: 1 });
    frame('a');
    frame('b');
    frame('throw');
    frame('after');
    vi.advanceTimersByTime(1000);
    expect(calls.failed).toHaveLength(1);
    expect(budget.waiting).toBe(0);
    expect(calls.resume).toBe(0);
  });

  it('close drops what is held and stops the timer', () => {
    const { budget, seen, calls, frame } = budgetOf({ ratePerSecond: 10, burst: 1 });
    frame('a');
    frame('b');
    frame('c');
    budget.close();
    budget.hold('late'); // what the closing link still hands over is not kept
    expect(budget.waiting).toBe(0);
    vi.advanceTimersByTime(10_000);
    expect(seen).toEqual(['a', 'b']);
    expect(calls.resume).toBe(0);
    budget.spend();
    expect(calls.pause).toBe(1);
  });
});

describe('ReadBudget: devices from one address share a budget too', () => {
  beforeEach(() => void vi.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => void vi.useRealTimers());

  const own = { ratePerSecond: 100, burst: 200 };

  it('pauses every device of the address once their frames together pass its budget, and no device elsewhere', () => {
    const sources = new SourceReadBudgets({ ratePerSecond: 10, burst: 30 });
    const a = budgetOf(own, undefined, sources.share('10.0.0.1', Date.now()));
    const b = budgetOf(own, undefined, sources.share('10.0.0.1', Date.now()));
    const other = budgetOf(own, undefined, sources.share('10.0.0.2', Date.now()));
    for (let i = 0; i < 15; i++) a.frame(`a${i}`);
    for (let i = 0; i < 15; i++) b.frame(`b${i}`);
    expect(a.calls.pause + b.calls.pause).toBe(0); // 30: each far under its own 200, together at the address's burst
    a.frame('a15');
    expect(a.calls).toMatchObject({ pause: 1, by: ['address'] });
    b.frame('b15');
    expect(b.calls).toMatchObject({ pause: 1, by: ['address'] });
    for (let i = 0; i < 25; i++) other.frame(`o${i}`);
    expect(other.calls.pause).toBe(0);
    // Two frames owed at 10/s: a is back once its deficit (1) is refilled, b once its (2) is.
    a.frame('a16');
    vi.advanceTimersByTime(100);
    expect(a.seen.at(-1)).toBe('a16');
  });

  it('holds many devices of one address to the address rate together, each of them served', () => {
    const rate = 200;
    const sources = new SourceReadBudgets({ ratePerSecond: rate, burst: 100 });
    const devices = Array.from({ length: 10 }, () => budgetOf(own, undefined, sources.share('192.0.2.7', Date.now())));
    // Each device's link hands over a frame whenever it is read (a flood), 5 s of 1 ms ticks.
    for (let ms = 0; ms < 5000; ms++) {
      for (const d of devices) if (!d.budget.paused) d.frame('n');
      vi.advanceTimersByTime(1);
    }
    const handled = devices.map((d) => d.seen.length);
    const total = handled.reduce((x, y) => x + y, 0);
    // The burst, the rate for 5 s, and at most one frame per device handled past it (paid for in advance).
    expect(total).toBeLessThanOrEqual(100 + rate * 5 + devices.length);
    expect(total).toBeGreaterThanOrEqual(rate * 5 * 0.9);
    for (const n of handled) expect(n).toBeGreaterThan(0);
    expect(devices.every((d) => d.calls.by.every((by) => by === 'address'))).toBe(true);
  });

  it('keys an address as the connection caps do (IPv4-mapped IPv6 is its IPv4, an IPv6 /64 is one source), and outlives the connection', () => {
    const sources = new SourceReadBudgets({ ratePerSecond: 1, burst: 5 });
    const v4 = sources.share('203.0.113.9', Date.now());
    expect(sources.share('::ffff:203.0.113.9', Date.now())).toBe(v4);
    const v6 = sources.share('2001:db8:1:2::1', Date.now());
    expect(sources.share('2001:db8:1:2:ffff::7', Date.now())).toBe(v6);
    expect(sources.share('2001:db8:1:3::1', Date.now())).not.toBe(v6);
    expect(sources.size).toBe(3);
    const first = budgetOf(own, undefined, v4);
    for (let i = 0; i < 6; i++) first.frame(`f${i}`);
    expect(first.calls.pause).toBe(1);
    first.budget.close();
    // A new connection from the same address finds the address's budget spent, not refilled.
    const again = budgetOf(own, undefined, sources.share('203.0.113.9', Date.now()));
    again.frame('x');
    expect(again.calls).toMatchObject({ pause: 1, by: ['address'] });
  });
});
