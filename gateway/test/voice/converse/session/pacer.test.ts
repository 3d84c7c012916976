import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { EncodeJob, ScheduledEncoder } from '../../../../src/voice/converse/contracts.js';
import { DownlinkPacer, type PacedItem } from '../../../../src/voice/converse/session/pacer.js';

/** The downlink pacer on a fake clock: what goes out, and when, frame by frame. */
describe('DownlinkPacer', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  const frame = (n: number): PacedItem => ({ kind: 'frame', opus: Uint8Array.of(0x58, n) });
  function pacer(o: { leadFrames?: number; maxLeadFrames?: number; maxQueued?: number; late?: string[]; skew?: () => number } = {}) {
    const sent: Array<{ at: number; frame?: number; ts?: number; json?: object }> = [];
    const p = new DownlinkPacer(
      { frame: (opus, ts) => sent.push({ at: Date.now(), frame: opus[1]!, ts }), json: (m) => sent.push({ at: Date.now(), json: m }) },
      {
        frameMs: 60,
        leadFrames: o.leadFrames ?? 3,
        ...(o.maxLeadFrames ? { maxLeadFrames: o.maxLeadFrames } : {}),
        maxQueued: o.maxQueued ?? 100,
        now: () => Date.now() + (o.skew?.() ?? 0),
        onLate: (cause) => o.late?.push(cause),
      },
    );
    return { p, sent };
  }

  it('grows the lead from leadFrames to maxLeadFrames at twice real time, and never beyond', async () => {
    const { p, sent } = pacer({ leadFrames: 2, maxLeadFrames: 6 });
    for (let i = 0; i < 30; i++) await p.push(frame(i));
    // The first lead + 1 at once (frame 0 plays now).
    expect(sent.map((s) => s.frame)).toEqual([0, 1, 2]);
    // Then two frames per period until 6 are ahead of playback, then one per period.
    await vi.advanceTimersByTimeAsync(60);
    expect(sent).toHaveLength(5);
    await vi.advanceTimersByTimeAsync(5 * 60);
    const ahead = sent.map((s) => s.ts! / 60 - s.at / 60);
    expect(Math.max(...ahead)).toBe(6);
    expect(ahead.slice(-3)).toEqual([6, 6, 6]);
    await vi.advanceTimersByTimeAsync(30 * 60);
    expect(sent).toHaveLength(30);
  });

  it('counts a frame sent over a period after playback ran dry, by whether it waited in the queue or came late', async () => {
    const late: string[] = [];
    let skew = 0;
    const { p } = pacer({ leadFrames: 1, late, skew: () => skew });
    await p.push(frame(0));
    await p.push(frame(1));
    await p.push(frame(2));
    expect(late).toEqual([]);
    // Frame 2 waits for its time; its timer fires a second late, as when the event loop was busy.
    skew = 1000;
    await vi.advanceTimersByTimeAsync(60);
    expect(late).toEqual(['waiting']);
    // The queue ran dry; a frame the synthesiser delivers long after it was due came late.
    await vi.advanceTimersByTimeAsync(1000);
    await p.push(frame(3));
    expect(late).toEqual(['waiting', 'arrived']);
  });

  it('sends the lead at once, then one frame per 60 ms, stamped with its place in the segment', async () => {
    const { p, sent } = pacer({ leadFrames: 3 });
    for (let i = 0; i < 10; i++) await p.push(frame(i));
    // Frames 0..3 are due at or before now (frame n is due `lead` frames before it plays).
    expect(sent.map((s) => s.frame)).toEqual([0, 1, 2, 3]);
    await vi.advanceTimersByTimeAsync(60);
    expect(sent.map((s) => s.frame)).toEqual([0, 1, 2, 3, 4]);
    await vi.advanceTimersByTimeAsync(5 * 60);
    expect(sent.map((s) => s.frame)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(sent.map((s) => s.ts)).toEqual([0, 60, 120, 180, 240, 300, 360, 420, 480, 540]);
    // Never more than lead + 1 frames ahead of what the device has played.
    for (const s of sent) expect(s.ts! / 60 - s.at / 60).toBeLessThanOrEqual(4);
    await p.drained();
  });

  it('keeps markers in order with the audio they announce', async () => {
    const { p, sent } = pacer({ leadFrames: 0 });
    await p.push({ kind: 'json', message: { state: 'sentence_start', text: 'One.' } });
    await p.push(frame(0));
    await p.push(frame(1));
    await p.push({ kind: 'json', message: { state: 'sentence_start', text: 'Two.' } });
    await p.push(frame(2));
    await vi.advanceTimersByTimeAsync(3 * 60);
    expect(sent.map((s) => s.json ?? s.frame)).toEqual([{ state: 'sentence_start', text: 'One.' }, 0, 1, { state: 'sentence_start', text: 'Two.' }, 2]);
    // The second marker went out when frame 1 had been sent, not before.
    expect(sent[3]!.at).toBe(sent[2]!.at);
  });

  it('makes push wait while the queue is full, and lets it in as frames go out', async () => {
    const { p, sent } = pacer({ leadFrames: 0, maxQueued: 2 });
    await p.push(frame(0)); // sent at once
    await p.push(frame(1));
    await p.push(frame(2));
    let third = false;
    const pending = p.push(frame(3)).then((ok) => (third = ok));
    await vi.advanceTimersByTimeAsync(0);
    expect(third).toBe(false);
    expect(p.queued).toBe(2);
    await vi.advanceTimersByTimeAsync(60);
    await pending;
    expect(third).toBe(true);
    expect(sent.map((s) => s.frame)).toEqual([0, 1]);
  });

  it('after a gap (the synthesiser was slow) restarts the clock rather than bursting to catch up', async () => {
    const { p, sent } = pacer({ leadFrames: 2 });
    await p.push(frame(0));
    await vi.advanceTimersByTimeAsync(1000);
    for (let i = 1; i < 8; i++) await p.push(frame(i));
    // Frame 1 plays now (the device ran dry), so only frames 1..3 (the lead) go at once.
    expect(sent.filter((s) => s.at === 1000).map((s) => s.frame)).toEqual([1, 2, 3]);
    await vi.advanceTimersByTimeAsync(60);
    expect(sent.map((s) => s.frame)).toEqual([0, 1, 2, 3, 4]);
  });

  it('clear drops what is queued and says how many frames; a waiting push whose speaker was stopped queues nothing', async () => {
    const { p, sent } = pacer({ leadFrames: 0, maxQueued: 3 });
    for (let i = 0; i < 4; i++) await p.push(frame(i));
    // The queue is full: the speaker's next push waits; then the turn is aborted and the queue cleared.
    const ac = new AbortController();
    const waiting = p.push(frame(4), ac.signal);
    ac.abort();
    expect(p.clear()).toBe(3);
    expect(await waiting).toBe(false);
    await vi.advanceTimersByTimeAsync(600);
    expect(sent.map((s) => s.frame)).toEqual([0]);
    expect(p.queued).toBe(0);
    p.close();
    expect(await p.push(frame(10))).toBe(false);
    await p.drained();
  });

  /** A scheduled encoder the test completes by hand: what deadline each frame got, and its packet on `finish`. */
  function manualEncoder(backlog?: number) {
    const jobs: Array<{ deadline: number; pcm: Int16Array; finish(): void; cancelled: boolean }> = [];
    const encoder: ScheduledEncoder = {
      sampleRate: 24_000,
      frameMs: 60,
      frameSamples: 1,
      schedule(pcm, deadline) {
        const waiters: Array<() => void> = [];
        const job: EncodeJob & { packet: Uint8Array | undefined; settled: boolean } = {
          packet: undefined,
          settled: false,
          onSettled: (fn) => (job.settled ? fn() : waiters.push(fn)),
          cancel: () => void (entry.cancelled = true),
          ...(backlog === undefined ? {} : { backlog }),
        };
        const entry = {
          deadline,
          pcm,
          cancelled: false,
          finish() {
            job.packet = Uint8Array.of(0x58, pcm[0]!);
            job.settled = true;
            for (const w of waiters) w();
          },
        };
        jobs.push(entry);
        return job;
      },
      free() {},
    };
    return { encoder, jobs };
  }

  it('hands PCM to a scheduled encoder at once with when the device needs it, and sends each frame once encoded and due', async () => {
    const late: string[] = [];
    const { p, sent } = pacer({ leadFrames: 1, late });
    const { encoder, jobs } = manualEncoder();
    for (let i = 0; i < 4; i++) await p.push({ kind: 'pcm', pcm: Int16Array.of(i), encoder });
    // Not started yet: frame k is needed k periods from now, each given one more period to be encoded.
    expect(jobs.map((j) => j.deadline)).toEqual([60, 120, 180, 240]);
    expect(sent).toEqual([]);
    jobs[1]!.finish();
    await vi.advanceTimersByTimeAsync(0);
    // Frame 1 is ready but frame 0 is not: order holds.
    expect(sent).toEqual([]);
    jobs[0]!.finish();
    expect(sent.map((s) => s.frame)).toEqual([0, 1]);
    // Frame 2 is due at 60 ms and still encoding; it is sent when its encoding ends, counted late by that cause.
    await vi.advanceTimersByTimeAsync(200);
    expect(sent.map((s) => s.frame)).toEqual([0, 1]);
    jobs[2]!.finish();
    expect(sent.map((s) => s.frame)).toEqual([0, 1, 2]);
    expect(late).toEqual(['encoding']);
    // Once started, a new frame's deadline follows playback.
    await p.push({ kind: 'pcm', pcm: Int16Array.of(4), encoder });
    expect(jobs[4]!.deadline).toBe(200 + 2 * 60 + 60);
    // clear() cancels what is still being encoded.
    expect(p.clear()).toBe(2);
    expect(jobs.slice(3).map((j) => j.cancelled)).toEqual([true, true]);
    jobs[3]!.finish();
    await vi.advanceTimersByTimeAsync(600);
    expect(sent.map((s) => s.frame)).toEqual([0, 1, 2]);
  });

  it("holds a segment's first frame until its first lead is encoded when the encoder is backed up, not otherwise", async () => {
    for (const backlog of [500, 0]) {
      const { p, sent } = pacer({ leadFrames: 2 });
      const { encoder, jobs } = manualEncoder(backlog);
      for (let i = 0; i < 5; i++) await p.push({ kind: 'pcm', pcm: Int16Array.of(i), encoder });
      jobs[0]!.finish();
      jobs[1]!.finish();
      expect(sent.map((s) => s.frame)).toEqual(backlog ? [] : [0, 1]);
      jobs[2]!.finish();
      // The first lead + 1 go together; after that frames follow their pace, held no more.
      expect(sent.map((s) => s.frame)).toEqual([0, 1, 2]);
      jobs[3]!.finish();
      await vi.advanceTimersByTimeAsync(60);
      expect(sent.map((s) => s.frame)).toEqual([0, 1, 2, 3]);
      p.close();
    }
  });
});
