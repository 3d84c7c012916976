import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Assistant } from '../../src/assistant/assistant.js';
import { ConfigSchema } from '../../src/config.js';
import type { HubTool, McpHub } from '../../src/hub/hub.js';
import { createLogger } from '../../src/log.js';
import { createMetrics, type Metrics } from '../../src/metrics.js';
import { llmModels } from '../../../test/support/assistant.js';
import { metricValue } from '../../../test/support/device-parts.js';
import { startLlmServer, type LlmServer, type ScriptedReply } from '../../../test/support/llm-server.js';

/**
 * The model endpoint as a hostile or broken server (a compromised or misconfigured OpenAI-, Anthropic- or
 * Gemini-compatible one), spoken to by the gateway's own SDK clients: what it sends is bounded in bytes, in text, in
 * tool calls and in the numbers it reports, and every fault is a MODEL_ERROR for the caller, never a crash.
 */
const FAULTS = 'voxgate_assistant_model_reply_faults_total';
const LEVEL: HubTool = {
  name: 'lights__set_level',
  description: 'Set the light level',
  inputSchema: { type: 'object', properties: { level: { type: 'number' } } },
  source: { kind: 'server', server: 'lights', tool: 'set_level' },
};
const PROVIDERS = ['oa', 'an', 'ge'] as const;
const apiOf = { oa: 'openai', an: 'anthropic', ge: 'gemini' } as const;

describe('a hostile model endpoint', () => {
  let llm: LlmServer;
  beforeAll(async () => {
    llm = await startLlmServer();
  });
  afterAll(async () => {
    await llm.close();
  });

  /** An assistant on the scripted server; `ran` gets the arguments of every tool call that reached the hub. */
  function assistant(settings: Record<string, unknown> = {}): { a: Assistant; metrics: Metrics; ran: Array<Record<string, unknown>> } {
    const ran: Array<Record<string, unknown>> = [];
    const hub = {
      tools: () => [LEVEL],
      instructions: () => ({ system: [] }),
      callTarget: (name: string) => (name === LEVEL.name ? LEVEL : undefined),
      call: (_name: string, args: Record<string, unknown>) => {
        ran.push(args);
        return Promise.resolve({ content: [{ type: 'text' as const, text: `done: ${'r'.repeat(15_000)}` }], isError: false, durationMs: 1 });
      },
    } as unknown as McpHub;
    const metrics = createMetrics();
    // A long model timeout: the bounds below, not the timer, must end these replies.
    const config = ConfigSchema.parse({ assistant: { models: llmModels(llm), modelTimeoutMs: 600_000, ...settings } }).assistant;
    return { a: new Assistant({ config, hub, log: createLogger('silent'), metrics }), metrics, ran };
  }
  const turn = async (a: Assistant, model: string, stream: boolean) =>
    (await a.start({ message: 'hello', model }, { principal: 'key-a' }, { stream, interactive: false, emit: () => undefined })).done;

  it('stops a streamed reply past its text bound and closes the request (each provider)', async () => {
    const { a, metrics } = assistant();
    try {
      for (const model of PROVIDERS) {
        llm.requests.length = 0;
        // 200 KiB of text, then the stream stays open: a model that talks on and never ends.
        llm.script([{ chunks: Array.from({ length: 200 }, () => 'x'.repeat(1024)), holdOpen: true }]);
        await expect(turn(a, model, true), apiOf[model]).rejects.toMatchObject({
          code: 'MODEL_ERROR',
          message: expect.stringContaining('longer than 65536 characters') as unknown,
        });
        await llm.requests[0]!.aborted;
        expect(await metricValue(metrics, FAULTS, { provider: apiOf[model], reason: 'too_long' })).toBe(1);
      }
    } finally {
      a.close();
    }
  }, 60_000);

  it('keeps a non-streamed reply within its text bound (each provider)', async () => {
    const { a, metrics } = assistant();
    try {
      for (const model of PROVIDERS) {
        llm.script([{ text: 'y'.repeat(100 * 1024) }]);
        await expect(turn(a, model, false), apiOf[model]).rejects.toMatchObject({
          code: 'MODEL_ERROR',
          message: expect.stringContaining('65536 characters') as unknown,
        });
        expect(await metricValue(metrics, FAULTS, { provider: apiOf[model], reason: 'too_long' })).toBe(1);
      }
    } finally {
      a.close();
    }
  }, 60_000);

  it('reads a huge non-streamed body only up to its byte bound (each provider)', async () => {
    const { a, metrics } = assistant();
    try {
      for (const model of PROVIDERS) {
        llm.script([{ text: 'z'.repeat(5 * 1024 * 1024) }]);
        await expect(turn(a, model, false), apiOf[model]).rejects.toMatchObject({
          code: 'MODEL_ERROR',
          message: expect.stringContaining('larger than 4194304 bytes') as unknown,
        });
        expect(await metricValue(metrics, FAULTS, { provider: apiOf[model], reason: 'too_large' })).toBe(1);
      }
    } finally {
      a.close();
    }
  }, 60_000);

  it('cuts an SSE line that never ends at the byte bound (each provider)', async () => {
    const { a, metrics } = assistant();
    try {
      for (const model of PROVIDERS) {
        llm.requests.length = 0;
        llm.script([{ raw: `data: {"choices":[{"index":0,"delta":{"content":"${'w'.repeat(5 * 1024 * 1024)}`, holdOpen: true }]);
        await expect(turn(a, model, true), apiOf[model]).rejects.toMatchObject({ code: 'MODEL_ERROR', message: expect.stringContaining('bytes') as unknown });
        await llm.requests[0]!.aborted;
        expect(await metricValue(metrics, FAULTS, { provider: apiOf[model], reason: 'too_large' })).toBe(1);
      }
    } finally {
      a.close();
    }
  }, 60_000);

  it('cuts a streamed tool call whose arguments run to megabytes at the byte bound', async () => {
    const { a, ran } = assistant();
    try {
      for (const model of ['oa', 'an'] as const) {
        llm.script([{ toolCalls: [{ name: LEVEL.name, arguments: `{"level": 1, "pad": "${'p'.repeat(5 * 1024 * 1024)}"}` }], argChunk: 16 * 1024 }]);
        await expect(turn(a, model, true), apiOf[model]).rejects.toMatchObject({ code: 'MODEL_ERROR', message: expect.stringContaining('bytes') as unknown });
      }
      expect(ran).toEqual([]);
    } finally {
      a.close();
    }
  }, 60_000);

  it('answers malformed SSE and JSON with MODEL_ERROR (each provider, streamed and not)', async () => {
    const { a } = assistant();
    try {
      for (const model of PROVIDERS)
        for (const [stream, raw] of [
          [true, 'data: {"choices": [ {not json\n\n'],
          [false, '{"choices": [ {not json'],
        ] as const) {
          llm.script([{ raw }]);
          await expect(turn(a, model, stream), `${apiOf[model]} stream=${stream}`).rejects.toMatchObject({ code: 'MODEL_ERROR' });
        }
    } finally {
      a.close();
    }
  }, 60_000);

  it('refuses a reply that asks for hundreds of tool calls, running none (each provider)', async () => {
    const { a, metrics, ran } = assistant();
    const many: ScriptedReply = { toolCalls: Array.from({ length: 300 }, () => ({ name: LEVEL.name, arguments: { level: 1 } })) };
    try {
      for (const model of PROVIDERS)
        for (const stream of [true, false]) {
          llm.script([many, { text: 'done' }]);
          await expect(turn(a, model, stream), `${apiOf[model]} stream=${stream}`).rejects.toMatchObject({
            code: 'MODEL_ERROR',
            message: expect.stringContaining('300 tool calls') as unknown,
          });
        }
      expect(ran).toEqual([]);
      expect(await metricValue(metrics, FAULTS, { provider: 'openai', reason: 'too_many_tool_calls' })).toBe(2);
    } finally {
      a.close();
    }
  }, 60_000);

  it('ignores absurd usage numbers (negative, huge, fractional) and counts them', async () => {
    const { a, metrics } = assistant();
    try {
      for (const model of PROVIDERS)
        for (const stream of [true, false]) {
          llm.script([{ text: 'fine', usage: { input: -5, output: 1e300 } }]);
          const r = await turn(a, model, stream);
          expect([r.text, r.usage], `${apiOf[model]} stream=${stream}`).toEqual(['fine', { inputTokens: 0, outputTokens: 0 }]);
        }
      llm.script([{ text: 'fine', usage: { input: 12.5, output: 7 } }]);
      expect((await turn(a, 'oa', false)).usage).toEqual({ inputTokens: 0, outputTokens: 7 });
      expect(await metricValue(metrics, FAULTS, { provider: 'openai', reason: 'bad_usage' })).toBe(3);
      expect(await metricValue(metrics, 'voxgate_assistant_tokens_total', { provider: 'openai', direction: 'output' })).toBe(7);
    } finally {
      a.close();
    }
  }, 60_000);

  it('does not run a tool with the half of its arguments an Anthropic stream sent before it stopped', async () => {
    const { a, ran } = assistant();
    try {
      // A stream that ends inside a tool call's JSON (a model stopped at max_tokens, or a cut connection): the SDK's
      // lenient parse makes {"level": 10} of `{"level": 100` cut short.
      llm.script([{ toolCalls: [{ name: LEVEL.name, arguments: '{"level": 10' }] }, { text: 'I could not set it.' }]);
      const r = await turn(a, 'an', true);
      expect(ran).toEqual([]);
      expect(r.toolCalls).toMatchObject([{ name: LEVEL.name, isError: true }]);
      const results = JSON.stringify(llm.requests.at(-1)!.body['messages']);
      expect(results).toContain('the arguments were not valid JSON');
      // A whole object still runs.
      llm.script([{ toolCalls: [{ name: LEVEL.name, arguments: '{"level": 100}' }] }, { text: 'Set.' }]);
      await turn(a, 'an', true);
      expect(ran).toEqual([{ level: 100 }]);
    } finally {
      a.close();
    }
  }, 60_000);

  it('refuses a stream cut before the model finished, and runs none of its tool calls (each provider)', async () => {
    const { a, metrics, ran } = assistant();
    try {
      for (const model of PROVIDERS) {
        // The server (or the connection) dies mid-answer: no finish_reason / [DONE], no message_stop, no finishReason.
        llm.script([{ text: 'The level is now', cut: true }]);
        await expect(turn(a, model, true), apiOf[model]).rejects.toMatchObject({
          code: 'MODEL_ERROR',
          message: expect.stringContaining('the reply stream ended before the model finished') as unknown,
        });
        // A tool call whose arguments came whole, in a reply that did not: not run.
        llm.script([{ toolCalls: [{ name: LEVEL.name, arguments: { level: 100 } }], cut: true }, { text: 'Set.' }]);
        await expect(turn(a, model, true), apiOf[model]).rejects.toMatchObject({ code: 'MODEL_ERROR' });
        expect(await metricValue(metrics, FAULTS, { provider: apiOf[model], reason: 'truncated' }), apiOf[model]).toBe(2);
      }
      expect(ran).toEqual([]);
    } finally {
      a.close();
    }
  }, 60_000);

  it('takes a stream that finished as the answer, tool calls and text (each provider, as real servers send them)', async () => {
    const { a, metrics, ran } = assistant();
    try {
      for (const model of PROVIDERS) {
        llm.script([{ toolCalls: [{ name: LEVEL.name, arguments: { level: 100 } }] }, { text: 'Set to 100.' }]);
        expect((await turn(a, model, true)).text, apiOf[model]).toBe('Set to 100.');
        expect(await metricValue(metrics, FAULTS, { provider: apiOf[model], reason: 'truncated' })).toBe(0);
      }
      expect(ran).toEqual([{ level: 100 }, { level: 100 }, { level: 100 }]);
      // A prompt Gemini blocks is answered by promptFeedback alone (no candidate, so no finishReason): not a cut.
      llm.script([{ raw: 'data: {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3}}\r\n\r\n' }]);
      expect((await turn(a, 'ge', true)).text).toBe('');
      expect(await metricValue(metrics, FAULTS, { reason: 'truncated' })).toBe(0);
    } finally {
      a.close();
    }
  }, 60_000);

  it("bounds an Anthropic reply's thinking together with its text (streamed and not); a short one passes", async () => {
    const { a, metrics } = assistant();
    // 100 Ki characters of thinking and a two-word answer: the SDK keeps every thinking delta until the reply ends.
    const endless = Array.from({ length: 100 }, () => 't'.repeat(1024));
    try {
      for (const stream of [true, false]) {
        llm.script([{ reasoning: endless, text: 'Done now.' }]);
        await expect(turn(a, 'an', stream), `stream=${stream}`).rejects.toMatchObject({
          code: 'MODEL_ERROR',
          message: expect.stringContaining('longer than 65536 characters (its thinking included)') as unknown,
        });
      }
      expect(await metricValue(metrics, FAULTS, { provider: 'anthropic', reason: 'too_long' })).toBe(2);
      for (const stream of [true, false]) {
        llm.script([{ reasoning: ['The person wants a greeting.'], text: 'Hello!' }]);
        expect((await turn(a, 'an', stream)).text, `stream=${stream}`).toBe('Hello!');
      }
    } finally {
      a.close();
    }
  }, 60_000);

  it('drops OpenAI-compatible reasoning_content and Gemini thoughts as they arrive: never the answer, never refused', async () => {
    const { a, metrics } = assistant();
    // Past the text bound: had the providers kept it (or counted it), the reply would be refused too_long.
    const long = Array.from({ length: 100 }, () => 'r'.repeat(1024));
    try {
      for (const model of ['oa', 'ge'] as const)
        for (const stream of [true, false]) {
          llm.script([{ reasoning: long, text: 'Done now.' }]);
          const deltas: string[] = [];
          const started = await a.start(
            { message: 'hello', model },
            { principal: 'key-a' },
            {
              stream,
              interactive: false,
              emit: (e) => e.type === 'text.delta' && deltas.push(e.text),
            },
          );
          expect((await started.done).text, `${apiOf[model]} stream=${stream}`).toBe('Done now.');
          expect(deltas.join('')).toBe(stream ? 'Done now.' : '');
        }
      expect(await metricValue(metrics, FAULTS, { reason: 'too_long' })).toBe(0);
    } finally {
      a.close();
    }
  }, 60_000);

  it('stores an exchange larger than a conversation holds cut to its bound; the caller has it whole (each provider)', async () => {
    // The smallest conversation bound (1 KiB) and a model that echoes its tool's long result into a 60 000-character
    // answer, within the reply's text bound: the exchange alone is 60 times what the conversation may hold.
    const { a } = assistant({ maxConversationBytes: 1024 });
    try {
      for (const model of PROVIDERS) {
        const echo = `The job said: ${'r'.repeat(60_000)}`;
        llm.script([{ toolCalls: [{ name: LEVEL.name, arguments: { level: 1 } }] }, { text: echo }]);
        const r = await turn(a, model, true);
        expect(r.text, apiOf[model]).toBe(echo);
        const c = a.conversation(r.conversationId, { principal: 'key-a' })!;
        const stored = c.messages.reduce((n, m) => n + Buffer.byteLength(m.content), 0);
        expect([c.bytes, stored <= 1024, c.bytes === stored], apiOf[model]).toEqual([stored, true, true]);
        expect(c.messages.map((m) => m.content)).toEqual([
          'hello',
          expect.stringMatching(/^The job said: r+\n\[\.\.\. cut when stored: the answer was 60014 characters\]$/),
        ]);
        // The next turn in it goes on, and the model reads the cut exchange.
        llm.requests.length = 0;
        llm.script([{ text: 'Anything else?' }]);
        const next = await a.start(
          { message: 'thanks', model, conversationId: r.conversationId },
          { principal: 'key-a' },
          { stream: true, interactive: false, emit: () => undefined },
        );
        expect((await next.done).text).toBe('Anything else?');
        expect(JSON.stringify(llm.requests[0]!.body)).toContain('cut when stored');
      }
    } finally {
      a.close();
    }
  }, 60_000);
});
