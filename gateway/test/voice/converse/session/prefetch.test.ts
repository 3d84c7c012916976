import { describe, expect, it, vi } from 'vitest';
import { PrefetchedSpeech } from '../../../../src/voice/converse/session/prefetch.js';

/** A sentence's speech read ahead of its speaking: in order, bounded, errors handed to the reader, cancellable. */
describe('PrefetchedSpeech', () => {
  const chunk = (v: number) => Int16Array.from({ length: 10 }, () => v);

  it('reads the provider before the speaker asks, and hands the chunks on in order', async () => {
    let read = 0;
    const speech = new PrefetchedSpeech(1000, new AbortController().signal);
    speech.start(
      (async function* () {
        for (let i = 1; i <= 3; i++) {
          read = i;
          yield chunk(i);
        }
      })(),
    );
    await vi.waitFor(() => expect(read).toBe(3));
    const got: number[] = [];
    for await (const c of speech) got.push(c[0]!);
    expect(got).toEqual([1, 2, 3]);
  });

  it('holds at most its bound unread: the provider is not read further until the speaker takes some', async () => {
    let read = 0;
    const speech = new PrefetchedSpeech(25, new AbortController().signal);
    speech.start(
      (async function* () {
        for (let i = 1; i <= 10; i++) {
          read = i;
          yield chunk(i);
        }
      })(),
    );
    // 10 samples a chunk, at most 25 held: the third chunk is read, then the pump waits.
    await vi.waitFor(() => expect(read).toBe(3));
    await new Promise((r) => setImmediate(r));
    expect(read).toBe(3);
    const got: number[] = [];
    for await (const c of speech) got.push(c[0]!);
    expect(got).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it("hands the provider's error to the reader after the chunks that came before it", async () => {
    const speech = new PrefetchedSpeech(1000, new AbortController().signal);
    speech.start(
      (async function* () {
        yield chunk(1);
        throw new Error('speech API answered 500');
      })(),
    );
    const got: number[] = [];
    await expect(
      (async () => {
        for await (const c of speech) got.push(c[0]!);
      })(),
    ).rejects.toThrow('speech API answered 500');
    expect(got).toEqual([1]);
  });

  it('aborts its signal when the turn aborts, or when cancelled', () => {
    const turn = new AbortController();
    const a = new PrefetchedSpeech(1000, turn.signal);
    const b = new PrefetchedSpeech(1000, turn.signal);
    b.cancel();
    expect([a.signal.aborted, b.signal.aborted]).toEqual([false, true]);
    turn.abort();
    expect(a.signal.aborted).toBe(true);
  });
});
