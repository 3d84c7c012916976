import { afterEach, describe, expect, it, vi } from 'vitest';
import { FairGate, GateRefused, type GateLimits, type GateSlot } from '../../src/throttle/fair-gate.js';

const limits = (o: Partial<GateLimits> = {}): GateLimits => ({ maxConcurrent: 2, maxWaiting: 10, maxWaitingPerShare: 10, maxWaitMs: 60_000, ...o });

/** Settles pending promise callbacks (a grant resolves its waiter's promise). */
const tick = () => new Promise<void>((r) => setImmediate(r));

/** Acquires and records the order in which slots are granted. */
function taker(gate: FairGate, granted: string[]) {
  return (label: string, share: string, signal?: AbortSignal): Promise<GateSlot> =>
    gate.acquire(share, signal).then((slot) => {
      granted.push(label);
      return slot;
    });
}

async function refusal(p: Promise<unknown>): Promise<GateRefused> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(GateRefused);
  return e as GateRefused;
}

afterEach(() => {
  vi.useRealTimers();
});

describe('FairGate', () => {
  it('a share holds at most maxConcurrentPerShare slots: another share takes a free one at once, and the capped share waits its turn', async () => {
    const gate = new FairGate(limits({ maxConcurrent: 4, maxConcurrentPerShare: 3 }));
    const granted: string[] = [];
    const take = taker(gate, granted);
    // One tenant's long requests (speech streamed at real time): three run, the fourth waits though a slot is free.
    const a = [take('a1', 'A'), take('a2', 'A'), take('a3', 'A'), take('a4', 'A')];
    await tick();
    expect(granted).toEqual(['a1', 'a2', 'a3']);
    expect([gate.inFlight, gate.waiting]).toEqual([3, 1]);
    // Another tenant is not refused for want of a slot: the free one is its at once, past A's waiter.
    const b1 = take('b1', 'B');
    await tick();
    expect(granted).toEqual(['a1', 'a2', 'a3', 'b1']);
    // A second one of B waits (every slot is taken), behind A's older waiter.
    const b2 = take('b2', 'B');
    await tick();
    expect([gate.inFlight, gate.waiting]).toEqual([4, 2]);
    (await b1).release();
    await tick();
    // A is at its cap: the slot goes to B's waiter, not to A's older one.
    expect(granted.at(-1)).toBe('b2');
    (await a[0]!).release();
    await tick();
    expect(granted.at(-1)).toBe('a4');
    for (const s of [...a.slice(1), b2]) (await s).release();
    expect([gate.inFlight, gate.waiting]).toEqual([0, 0]);
  });
  it('lets maxConcurrent through; the rest wait and take the slots as they free, never over the cap', async () => {
    const counts: Array<[number, number]> = [];
    const gate = new FairGate(limits(), (inFlight, waiting) => counts.push([inFlight, waiting]));
    const granted: string[] = [];
    const take = taker(gate, granted);
    const slots = [take('a', 't'), take('b', 't'), take('c', 't'), take('d', 't')];
    await tick();
    expect(granted).toEqual(['a', 'b']);
    expect([gate.inFlight, gate.waiting]).toEqual([2, 2]);
    (await slots[0]!).release();
    (await slots[0]!).release(); // a second release of the same slot frees nothing more
    await tick();
    expect(granted).toEqual(['a', 'b', 'c']);
    expect([gate.inFlight, gate.waiting]).toEqual([2, 1]);
    for (const s of slots.slice(1)) (await s).release();
    expect([gate.inFlight, gate.waiting]).toEqual([0, 0]);
    expect(Math.max(...counts.map(([f]) => f))).toBe(2);
  });

  it('refuses when the queue is full, and when one share has its part of it waiting, while other shares still queue', async () => {
    const gate = new FairGate(limits({ maxConcurrent: 1, maxWaiting: 3, maxWaitingPerShare: 2 }));
    const held = await gate.acquire('a');
    const a1 = gate.acquire('a');
    const a2 = gate.acquire('a');
    expect((await refusal(gate.acquire('a'))).reason).toBe('tenant_queue_full');
    const b1 = gate.acquire('b');
    expect((await refusal(gate.acquire('c'))).reason).toBe('queue_full');
    expect(gate.waiting).toBe(3);
    held.release();
    (await a1).release();
    (await b1).release();
    (await a2).release();
    expect([gate.inFlight, gate.waiting]).toEqual([0, 0]);
  });

  it('serves the shares in turn: a share with one waiter is not stuck behind another share’s backlog', async () => {
    const gate = new FairGate(limits({ maxConcurrent: 1 }));
    const granted: string[] = [];
    const slots = new Map<string, GateSlot>();
    const take = (label: string, share: string) => void taker(gate, granted)(label, share).then((s) => slots.set(label, s));
    take('first', 'a');
    for (const [label, share] of [
      ['a1', 'a'],
      ['a2', 'a'],
      ['a3', 'a'],
      ['b1', 'b'],
      ['c1', 'c'],
    ] as const)
      take(label, share);
    await tick();
    // One slot: each holder releases it, and the next grant shows who was served.
    while (granted.length < 6) {
      slots.get(granted.at(-1)!)!.release();
      await tick();
    }
    slots.get(granted.at(-1)!)!.release();
    expect(granted).toEqual(['first', 'a1', 'b1', 'c1', 'a2', 'a3']);
    expect([gate.inFlight, gate.waiting]).toEqual([0, 0]);
  });

  it('a waiter whose signal aborts leaves the queue at once and never takes a slot', async () => {
    const gate = new FairGate(limits({ maxConcurrent: 1 }));
    const granted: string[] = [];
    const take = taker(gate, granted);
    const held = await take('held', 't');
    const ac = new AbortController();
    const cancelled = take('cancelled', 't', ac.signal);
    const next = take('next', 't');
    expect(gate.waiting).toBe(2);
    ac.abort(new Error('the caller went away'));
    expect(gate.waiting).toBe(1);
    await expect(cancelled).rejects.toThrow('the caller went away');
    held.release();
    (await next).release();
    expect(granted).toEqual(['held', 'next']);
    expect([gate.inFlight, gate.waiting]).toEqual([0, 0]);
    // Already aborted: refused before it queues.
    await expect(gate.acquire('t', AbortSignal.abort(new Error('gone')))).rejects.toThrow('gone');
    expect(gate.waiting).toBe(0);
  });

  it('a waiter past maxWaitMs is refused and leaves the queue', async () => {
    vi.useFakeTimers();
    const gate = new FairGate(limits({ maxConcurrent: 1, maxWaitMs: 10_000 }));
    const held = await gate.acquire('t');
    const waiter = refusal(gate.acquire('t'));
    await vi.advanceTimersByTimeAsync(10_000);
    expect((await waiter).reason).toBe('wait_timeout');
    expect(gate.waiting).toBe(0);
    held.release();
    expect(gate.inFlight).toBe(0);
  });
});
