import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Assistant } from '../../src/assistant/assistant.js';
import { ConfigSchema } from '../../src/config.js';
import type { HubTool, McpHub } from '../../src/hub/hub.js';
import { createLogger } from '../../src/log.js';
import { createMetrics, type Metrics } from '../../src/metrics.js';
import { assistantTurns } from '../../src/voice/converse/assistant-port.js';
import { llmModels } from '../../../test/support/assistant.js';
import { metricValue } from '../../../test/support/device-parts.js';
import { startLlmServer, type LlmServer } from '../../../test/support/llm-server.js';
import { deferred } from '../../../test/support/wait.js';

/**
 * A turn as a whole has a deadline (assistant.turnTimeoutMs), not only each model request (modelTimeoutMs): here the
 * model's and the tools' own timeouts are ten minutes, so only the turn's deadline can end these turns. Without it
 * a model that keeps a request open, or tools that keep the turn waiting, held the turn (and a paid model) for up to
 * (maxToolRounds + 1) × modelTimeoutMs plus tool time.
 */
const SLOW: HubTool = {
  name: 'jobs__run',
  description: 'Runs a long job',
  inputSchema: { type: 'object', properties: {} },
  source: { kind: 'server', server: 'jobs', tool: 'run' },
};
// Long enough for a model request to reach the stand-in first on a busy machine (the tests assert it was aborted there).
const DEADLINE_MS = 5000;
const BOUND = { code: 'MODEL_TIMEOUT', message: expect.stringContaining(`within ${DEADLINE_MS} ms (assistant.turnTimeoutMs)`) as unknown };

describe('the turn deadline (assistant.turnTimeoutMs)', () => {
  let llm: LlmServer;
  beforeAll(async () => {
    llm = await startLlmServer();
  });
  afterAll(async () => {
    await llm.close();
  });

  /** An assistant whose tool runs until its call is aborted; `toolAborted` resolves when it is. */
  function assistant() {
    const toolStarted = deferred();
    const toolAborted = deferred();
    const hub = {
      tools: () => [SLOW],
      instructions: () => ({ system: [] }),
      callTarget: (name: string) => (name === SLOW.name ? SLOW : undefined),
      call: (_name: string, _args: unknown, o: { signal?: AbortSignal }) => {
        toolStarted.resolve();
        return new Promise((resolve) =>
          o.signal?.addEventListener('abort', () => {
            toolAborted.resolve();
            // A device cannot stop: its result comes late, and must not reach the model.
            resolve({ content: [{ type: 'text', text: 'late result' }], isError: false, durationMs: 1 });
          }),
        );
      },
    } as unknown as McpHub;
    const metrics = createMetrics();
    const config = ConfigSchema.parse({
      assistant: { models: llmModels(llm), modelTimeoutMs: 600_000, toolTimeoutMs: 600_000, turnTimeoutMs: DEADLINE_MS },
    }).assistant;
    const a = new Assistant({ config, hub, log: createLogger('silent'), metrics });
    return { a, metrics, toolStarted, toolAborted };
  }
  const turn = async (a: Assistant, model: string, stream: boolean) =>
    (await a.start({ message: 'hello', model }, { principal: 'key-a' }, { stream, interactive: false, emit: () => undefined })).done;
  const timedOut = (m: Metrics) => metricValue(m, 'voxgate_assistant_turns_total', { outcome: 'timeout' });
  /** Model requests of `provider` counted as timed out (the histogram's _count). */
  const requestsTimedOut = async (m: Metrics, provider: string) => {
    const h = (await m.registry.getMetricsAsJSON()).find((x) => x.name === 'voxgate_assistant_model_seconds');
    const counts = (h?.values ?? []) as Array<{ metricName?: string; labels: Record<string, unknown>; value: number }>;
    const v = counts.find((x) => x.metricName?.endsWith('_count') && x.labels['provider'] === provider && x.labels['outcome'] === 'timeout');
    return v?.value ?? 0;
  };

  it('aborts the model request in flight at the deadline: MODEL_TIMEOUT naming the turn bound, counted (streamed and not)', async () => {
    const { a, metrics } = assistant();
    try {
      for (const [model, stream] of [
        ['oa', true],
        ['an', false],
      ] as const) {
        llm.requests.length = 0;
        llm.script([{ hang: true }]);
        await expect(turn(a, model, stream), `${model} stream=${stream}`).rejects.toMatchObject(BOUND);
        expect(llm.requests).toHaveLength(1);
        await llm.requests[0]!.aborted;
      }
      expect(await timedOut(metrics)).toBe(2);
      expect(await requestsTimedOut(metrics, 'openai')).toBe(1);
    } finally {
      a.close();
    }
  }, 60_000);

  it('abandons a tool call still running at the deadline: aborted, its result never fed back to the model', async () => {
    const { a, metrics, toolStarted, toolAborted } = assistant();
    try {
      llm.requests.length = 0;
      llm.script([{ toolCalls: [{ name: SLOW.name, arguments: {} }] }, { text: 'the job is done' }]);
      const done = turn(a, 'ge', true);
      await toolStarted.promise;
      await expect(done).rejects.toMatchObject(BOUND);
      await toolAborted.promise;
      // The late result came (the stand-in answered on abort), and no model request carried it.
      expect(llm.requests).toHaveLength(1);
      expect(await timedOut(metrics)).toBe(1);
      expect(await metricValue(metrics, 'voxgate_assistant_turns_total', { outcome: 'failed' })).toBe(0);
    } finally {
      a.close();
    }
  }, 60_000);

  it("bounds a device's spoken turn (voice converse, through its assistant port) the same way", async () => {
    const { a, metrics } = assistant();
    try {
      llm.requests.length = 0;
      llm.script([{ chunks: ['I am still '], holdOpen: true }]);
      const handle = await assistantTurns(a, { model: 'oa' }, {}).start({ text: 'tell me a story', deviceId: '02:00:00:00:d1:01' }, () => undefined);
      await expect(handle.done).rejects.toMatchObject(BOUND);
      await llm.requests[0]!.aborted;
      expect(await timedOut(metrics)).toBe(1);
    } finally {
      a.close();
    }
  }, 60_000);
});
