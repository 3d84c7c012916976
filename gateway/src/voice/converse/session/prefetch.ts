/**
 * One sentence's synthesis, started before the sentence is spoken: its audio is read from the provider as it
 * comes and held (bounded) until the speaker takes it. Without it the next sentence is requested only when the
 * current one's stream has ended, and a device whose first sentence is short runs dry at the boundary.
 */
export class PrefetchedSpeech implements AsyncIterable<Int16Array> {
  private readonly chunks: Int16Array[] = [];
  private held = 0;
  private done = false;
  private error: unknown;
  private wake: (() => void) | undefined;
  private room: (() => void) | undefined;
  private readonly stop = new AbortController();

  /**
   * @param maxSamples what is held unread at most: the provider is not read further until the speaker takes some.
   */
  constructor(
    private readonly maxSamples: number,
    turnSignal: AbortSignal,
  ) {
    if (turnSignal.aborted) this.stop.abort();
    else turnSignal.addEventListener('abort', () => this.stop.abort(), { once: true, signal: this.stop.signal });
  }

  /** Aborts with the turn, or when the sentence will not be spoken (`cancel`). */
  get signal(): AbortSignal {
    return this.stop.signal;
  }

  /** Starts reading `source` (once). Never rejects: an error is handed to the reader. */
  start(source: AsyncIterable<Int16Array>): void {
    void this.pump(source);
  }

  /** The sentence will not be spoken: the request is closed and nothing more is held. */
  cancel(): void {
    this.stop.abort();
    this.chunks.length = 0;
    this.held = 0;
    this.room?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Int16Array> {
    for (;;) {
      const chunk = this.chunks.shift();
      if (chunk) {
        this.held -= chunk.length;
        this.room?.();
        yield chunk;
        continue;
      }
      if (this.done) {
        if (this.error !== undefined) throw this.error;
        return;
      }
      await new Promise<void>((r) => (this.wake = r));
      this.wake = undefined;
    }
  }

  private async pump(source: AsyncIterable<Int16Array>): Promise<void> {
    try {
      for await (const chunk of source) {
        if (this.stop.signal.aborted) break;
        this.chunks.push(chunk);
        this.held += chunk.length;
        this.wake?.();
        while (this.held > this.maxSamples && !this.stop.signal.aborted) await new Promise<void>((r) => (this.room = r));
        this.room = undefined;
      }
    } catch (e) {
      this.error = e;
    } finally {
      this.done = true;
      this.wake?.();
    }
  }
}
