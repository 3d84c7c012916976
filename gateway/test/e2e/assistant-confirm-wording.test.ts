import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatStream, llmModels, openAiToolMessages, until } from '../../../test/support/assistant.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startLlmServer, type LlmServer } from '../../../test/support/llm-server.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

/**
 * What the model is told when a call that needs a yes did not get one (issue 24 item 9): only a person's
 * no is "the person declined"; with nobody to ask it must hear that no one could confirm, so it does not
 * tell the user they refused something never put to them. The wording itself: ../assistant/turn.test.ts;
 * here, which routes can ask a person and how the answer reaches the turn.
 */
const LAMP = '02:00:00:00:24:09';
const RESET = `device__${LAMP.replace(/:/g, '')}__self_factory_reset`;

describe('assistant: the wording of a call that was not confirmed', () => {
  let llm: LlmServer;
  let t: TestGateway;
  const resets: number[] = [];
  const lamp = new ReferenceDevice({
    deviceId: LAMP,
    tools: [{ name: 'self.factory_reset', description: 'Erase everything', annotations: { destructiveHint: true }, run: () => (resets.push(1), 'erased') }],
  });
  beforeAll(async () => {
    llm = await startLlmServer();
    t = await startTestGateway({ assistant: { models: llmModels(llm), defaultModel: 'oa', confirmTimeoutMs: 1000 }, mcp: { deviceTools: 'per_device' } });
    const ready = t.nextEvent('device.ready', LAMP);
    await lamp.connectWebSocket(t.wsUrl);
    await ready;
  });
  afterAll(async () => {
    lamp.terminate();
    await t.close();
    await llm.close();
  });

  const resetThenAnswer = () => {
    llm.script([{ toolCalls: [{ name: RESET, arguments: {} }] }, { text: 'ok' }]);
    llm.requests.length = 0;
  };
  const modelSaw = () => openAiToolMessages(llm.requests[1]!.body)[0]!.content;

  it('nobody to ask (/v1/chat/completions, plain JSON): not run, a confirmation nobody could give, not "the person declined"', async () => {
    const unconfirmed = await t.metric('voxgate_assistant_tool_calls_total', { outcome: 'unconfirmed' });
    resetThenAnswer();
    const res = await t.api('POST', '/v1/chat/completions', { model: 'oa', messages: [{ role: 'user', content: 'reset the lamp' }] });
    expect(res.status).toBe(200);
    expect(modelSaw()).toMatch(/^Not run: ".*" needs a person's confirmation, and nobody could give it here/);
    expect(modelSaw()).not.toMatch(/The person declined/);
    resetThenAnswer();
    expect((await t.api('POST', '/v1/assistant/chat', { message: 'reset the lamp' })).status).toBe(200);
    expect(modelSaw()).toContain('nobody could give it here');
    expect(await t.metric('voxgate_assistant_tool_calls_total', { outcome: 'unconfirmed' })).toBe(unconfirmed + 2);
    expect(resets).toEqual([]);
  });

  it('a person who says no over HTTP: "The person declined" (no answer in time: ../assistant/turn.test.ts)', async () => {
    resetThenAnswer();
    const s = await chatStream(t, { message: 'reset the lamp' });
    const turnId = String((await s.events.next()).data['turnId']);
    const ask = (await until(s, 'confirmation.required')).at(-1)!.data;
    expect((await t.api('POST', `/v1/assistant/turns/${turnId}/confirmations/${String(ask['callId'])}`, { approve: false })).status).toBe(204);
    await until(s, 'turn.completed');
    expect(modelSaw()).toMatch(/^The person declined: ".*" was not run\./);
    expect(resets).toEqual([]);
  });
});
