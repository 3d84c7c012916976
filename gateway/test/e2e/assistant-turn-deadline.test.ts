import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatStream, llmModels, until } from '../../../test/support/assistant.js';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startLlmServer, type LlmServer } from '../../../test/support/llm-server.js';

/**
 * Every HTTP way into a turn ends at assistant.turnTimeoutMs, with MODEL_TIMEOUT naming the bound: the assistant's
 * route (JSON and SSE) and the OpenAI-compatible one (plain and streamed, read by the official openai client). The
 * model's own timeout is ten minutes here, so only the turn's deadline can end these turns.
 */
// Long enough for the four model requests to reach the stand-in first on a busy machine (each is asserted aborted there).
const DEADLINE_MS = 8000;
const NAMED = `within ${DEADLINE_MS} ms (assistant.turnTimeoutMs)`;

describe('the turn deadline through the HTTP routes', () => {
  let llm: LlmServer;
  let t: TestGateway;
  let client: OpenAI;
  beforeAll(async () => {
    llm = await startLlmServer([]);
    t = await startTestGateway({ assistant: { models: llmModels(llm), defaultModel: 'oa', modelTimeoutMs: 600_000, turnTimeoutMs: DEADLINE_MS } });
    client = new OpenAI({ apiKey: TEST_API_KEY, baseURL: `${t.baseUrl}/v1`, maxRetries: 0 });
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });

  it('ends each of them at the deadline, with the model request closed', async () => {
    // Every model request hangs; the four turns run side by side, each with its own deadline.
    llm.script(() => ({ hang: true }));
    const json = t.api<{ code: string; detail: string }>('POST', '/v1/assistant/chat', { message: 'x' });
    const sse = chatStream(t, { message: 'x' }).then((s) => until(s, 'turn.failed', 30_000));
    const plain = client.chat.completions.create({ model: 'oa', messages: [{ role: 'user', content: 'x' }] });
    const streamed = (async () => {
      const s = await client.chat.completions.create({ model: 'oa', messages: [{ role: 'user', content: 'x' }], stream: true });
      for await (const _ of s) void _;
    })();

    const j = await json;
    expect([j.status, j.body.code]).toEqual([504, 'MODEL_TIMEOUT']);
    expect(j.body.detail).toContain(NAMED);
    expect((await sse).at(-1)!.data).toMatchObject({ code: 'MODEL_TIMEOUT', detail: expect.stringContaining(NAMED) as unknown });
    await expect(plain).rejects.toMatchObject({ status: 504, code: 'MODEL_TIMEOUT', message: expect.stringContaining(NAMED) as unknown });
    // A stream already answered 200: the failure comes as its last chunk, which the client raises.
    await expect(streamed).rejects.toMatchObject({ message: expect.stringContaining(NAMED) as unknown });

    expect(llm.requests).toHaveLength(4);
    await Promise.all(llm.requests.map((r) => r.aborted));
    expect(await t.metric('voxgate_assistant_turns_total', { outcome: 'timeout' })).toBe(4);
  }, 60_000);
});
