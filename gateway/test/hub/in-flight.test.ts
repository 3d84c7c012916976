import { describe, expect, it } from 'vitest';
import { CallsInFlight, CallStop, withStop } from '../../src/hub/in-flight.js';
import type { CallContext } from '../../src/hub/upstream/base.js';
import { messageBound, overCap, resultSize } from '../../src/hub/upstream/result-cap.js';

/** The hub's calls in flight (shutdown answers each at once) and its result cap, as parts. */
describe('CallsInFlight', () => {
  it('answers every call in flight and every later one SHUTTING_DOWN at drain, and aborts their work', async () => {
    const calls = new CallsInFlight();
    let aborted: unknown;
    const running = calls.track(
      {},
      'weather',
      (signal) => new Promise<string>((_r, reject) => signal.addEventListener('abort', () => ((aborted = signal.reason), reject(signal.reason)))),
    );
    const outcome = running.catch((e: unknown) => e);
    await calls.drain();
    expect(await outcome).toMatchObject({ code: 'SHUTTING_DOWN' });
    expect(aborted).toMatchObject({ code: 'SHUTTING_DOWN' });
    await expect(calls.track({}, 'weather', async () => 'late')).rejects.toMatchObject({ code: 'SHUTTING_DOWN' });
  });

  it("passes the caller's abort to the work, and knows which callers have a call on a server", async () => {
    const calls = new CallsInFlight();
    const ac = new AbortController();
    const peer = { key: {}, request: async () => ({}) } as unknown as NonNullable<Parameters<CallsInFlight['track']>[0]['peer']>;
    let release!: (v: string) => void;
    const work = calls.track(
      { signal: ac.signal, peer },
      'files',
      (signal) =>
        new Promise<string>((resolve, reject) => ((release = resolve), signal.addEventListener('abort', () => reject(new Error('caller went away'))))),
    );
    expect([...calls.peersOn('files').values()]).toEqual([peer]);
    expect(calls.peersOn('weather').size).toBe(0);
    ac.abort();
    await expect(work).rejects.toThrow('caller went away');
    expect(calls.peersOn('files').size).toBe(0);
    release('unused');
    expect(await calls.track({}, 'files', async () => 'ok')).toBe('ok');
  });
});

describe('CallStop', () => {
  it('is an AbortSignal for the work that reads one (made then, aborted or not), and plain listeners for the rest', () => {
    const early = new CallStop();
    const heard: string[] = [];
    const one = () => heard.push('one');
    early.addEventListener('abort', one);
    early.addEventListener('abort', () => heard.push('two'));
    early.removeEventListener('abort', one);
    const ctx = withStop<CallContext>({ timeoutMs: 5 }, early);
    expect(ctx.stop).toBe(early);
    expect(ctx.timeoutMs).toBe(5);
    const signal = ctx.signal!;
    expect(signal.aborted).toBe(false);
    early.abort('first');
    early.abort('second');
    expect([signal.aborted, signal.reason, early.reason, heard]).toEqual([true, 'first', 'first', ['two']]);

    const late = new CallStop();
    late.abort(new Error('gone'));
    expect(withStop<CallContext>({}, late).signal).toMatchObject({ aborted: true, reason: new Error('gone') });
  });

  it("gives the work the caller's fields with the new stop and its signal, not the caller's own signal or stop", () => {
    const callers = new AbortController();
    const callerStop = new CallStop();
    const onProgress = () => undefined;
    const caller = { tenant: 't1', principal: 'p', tokens: { a: 'b' }, signal: callers.signal, stop: callerStop, onProgress, timeoutMs: 7 };
    const stop = new CallStop();
    const ctx = withStop<CallContext & { tenant?: string; principal?: string }>(caller, stop);
    expect([ctx.tenant, ctx.principal, ctx.tokens, ctx.onProgress, ctx.timeoutMs]).toEqual(['t1', 'p', { a: 'b' }, onProgress, 7]);
    expect(ctx.stop).toBe(stop);
    expect(ctx.signal).not.toBe(callers.signal);
    stop.abort('stopped');
    expect([ctx.signal!.aborted, ctx.signal!.reason, callers.signal.aborted, callerStop.aborted]).toEqual([true, 'stopped', false, false]);
    // The caller's object is not changed.
    expect([caller.signal, caller.stop]).toEqual([callers.signal, callerStop]);
  });
});

describe('the result cap', () => {
  it("counts the larger of a result's two shapes, plus _meta, and names the part that was over", () => {
    const text = 'x'.repeat(900);
    const r = { content: [{ type: 'text' as const, text }], structuredContent: { text } };
    expect(resultSize(r).part).toBe('content');
    expect(overCap(r, 1000)).toBeUndefined();
    const big = { content: [{ type: 'text' as const, text: 'short' }], structuredContent: { rows: 'y'.repeat(2000) } };
    expect(overCap(big, 1000)).toBe(`its structuredContent was ${resultSize(big).bytes} bytes, over the limit of 1000 bytes (mcp.maxResultBytes)`);
    expect(resultSize({ content: [], _meta: { note: 'z'.repeat(100) } }).bytes).toBeGreaterThan(100);
    expect(messageBound(1000)).toBe(2000 + 64 * 1024);
  });
});
