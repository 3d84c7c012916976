import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { chatStream, llmModels, until } from '../../../test/support/assistant.js';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startLlmServer, type LlmServer } from '../../../test/support/llm-server.js';

/**
 * A streamed assistant turn to a caller that never reads: past the unread bound (events.maxBufferedBytes, small
 * here) the stream is cut and the turn cancelled, so neither the gateway's memory nor a paid model turn runs on
 * for nobody.
 */
const BOUND = 64 * 1024;
/** A model that streams 25 MiB and does not stop: far past what the kernel's socket buffers take for the caller. */
const TALKER = { chunks: Array.from({ length: 400 }, () => 'x'.repeat(64 * 1024)), holdOpen: true };

/** The models, each allowed a reply far past what these callers leave unread (a reply's bounds follow maxTokens). */
const longTalkers = (llm: LlmServer) => Object.fromEntries(Object.entries(llmModels(llm)).map(([name, m]) => [name, { ...m, maxTokens: 1_000_000 }]));

/** A caller that sends its request and never reads a byte of the answer: its socket is paused from the start. */
async function stalledPost(t: TestGateway, path: string, body: unknown): Promise<Socket> {
  const s = connect(Number(new URL(t.baseUrl).port), '127.0.0.1');
  s.pause();
  await once(s, 'connect');
  const json = JSON.stringify(body);
  s.write(
    `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${TEST_API_KEY}\r\n` +
      `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(json)}\r\n\r\n${json}`,
  );
  return s;
}

/** Reads what the gateway sent before it closed the stream, to its end. */
async function drainToEnd(s: Socket): Promise<string> {
  let tail = '';
  s.on('data', (c: Buffer) => (tail = (tail + c.toString('latin1')).slice(-4096)));
  s.resume();
  await once(s, 'close');
  return tail;
}

describe('a streamed turn whose caller stops reading', () => {
  let llm: LlmServer;
  let t: TestGateway;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    llm = await startLlmServer();
    t = await startTestGateway({ assistant: { models: longTalkers(llm) }, events: { maxBufferedBytes: BOUND } });
  });
  afterEach(() => {
    for (const s of sockets.splice(0)) s.destroy();
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });

  /** The caller is cut, the turn cancelled (the model request aborted), counted and logged once; another caller is served. */
  async function expectCut(path: string, body: unknown, cutsBefore: number): Promise<void> {
    llm.script([TALKER]);
    llm.requests.length = 0;
    const cancelledBefore = await t.metric('voxgate_assistant_turns_total', { outcome: 'cancelled' });
    const s = await stalledPost(t, path, body);
    sockets.push(s);
    await expect.poll(() => llm.requests.length, { timeout: 10_000 }).toBe(1);
    await expect.poll(() => t.metric('voxgate_sse_streams_dropped_total', { reason: 'slow_turn' }), { timeout: 20_000 }).toBe(cutsBefore + 1);
    await llm.requests[0]!.aborted;
    await expect.poll(() => t.metric('voxgate_assistant_turns_total', { outcome: 'cancelled' })).toBe(cancelledBefore + 1);
    // The caller, reading at last, gets what was sent before the cut and then the end: no completion.
    expect(await drainToEnd(s)).not.toContain('turn.completed');
    const line = t.logs.filter((l) => l['msg'] === 'SSE client stopped reading; its stream was cut').at(-1);
    expect(line).toMatchObject({ level: 40, route: path, reason: 'slow_turn', maxUnreadBytes: BOUND });
    expect(line!['unread']).toBeGreaterThan(BOUND);

    // Another caller, reading as it goes, gets its whole streamed answer.
    llm.script([{ text: 'still here', chunks: ['still', ' here'] }]);
    const sse = await chatStream(t, { message: 'hello', model: 'an' });
    const events = await until(sse, 'turn.completed');
    expect(events.at(-1)!.data['text']).toBe('still here');
    await sse.ended;
  }

  it('POST /v1/assistant/chat with stream: true', async () => {
    await expectCut('/v1/assistant/chat', { message: 'talk', model: 'an', stream: true }, 0);
  });

  it('POST /v1/chat/completions with stream: true', async () => {
    await expectCut('/v1/chat/completions', { model: 'an', stream: true, messages: [{ role: 'user', content: 'talk' }] }, 1);
  });
});

describe('a streamed turn that ended while its caller was not reading', () => {
  let llm: LlmServer;
  let t: TestGateway;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    llm = await startLlmServer();
    // An unread bound the turn never reaches, and a write timeout short enough for a test.
    t = await startTestGateway({ assistant: { models: longTalkers(llm) }, events: { maxBufferedBytes: 256 * 1024 * 1024, writeTimeoutMs: 5000 } });
  });
  afterEach(() => {
    for (const s of sockets.splice(0)) s.destroy();
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });

  /** The turn completes; what the caller left unread is dropped with its socket after the write timeout, counted and logged. */
  async function expectTimedOut(path: string, body: unknown, cutsBefore: number): Promise<void> {
    // 15 MiB: far past what the kernel's socket buffers take for a caller that reads nothing, and then the end (within
    // the reply's text bound at maxTokens 1 000 000: 16 000 000 characters).
    llm.script([{ chunks: Array.from({ length: 240 }, () => 'x'.repeat(64 * 1024)) }]);
    const completedBefore = await t.metric('voxgate_assistant_turns_total', { outcome: 'completed' });
    const s = await stalledPost(t, path, body);
    sockets.push(s);
    await expect.poll(() => t.metric('voxgate_assistant_turns_total', { outcome: 'completed' }), { timeout: 20_000 }).toBe(completedBefore + 1);
    await expect.poll(() => t.metric('voxgate_sse_streams_dropped_total', { reason: 'write_timeout' }), { timeout: 20_000 }).toBe(cutsBefore + 1);
    // The socket was closed: the caller, reading at last, gets what had reached the kernel, then the end.
    await drainToEnd(s);
    const line = t.logs.filter((l) => l['msg'] === 'SSE client stopped reading; its stream was cut').at(-1);
    expect(line).toMatchObject({ level: 40, route: path, reason: 'write_timeout', writeTimeoutMs: 5000 });
    expect(line!['unread']).toBeGreaterThan(0);
  }

  it('POST /v1/assistant/chat with stream: true', async () => {
    await expectTimedOut('/v1/assistant/chat', { message: 'talk', model: 'an', stream: true }, 0);
  });

  it('POST /v1/chat/completions with stream: true', async () => {
    await expectTimedOut('/v1/chat/completions', { model: 'an', stream: true, messages: [{ role: 'user', content: 'talk' }] }, 1);
  });
});
