import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { llmModels } from '../../../test/support/assistant.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startLlmServer, type LlmServer } from '../../../test/support/llm-server.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

/** Seed 003: tool calls written as text markers, for models without function calling (the parts: ../assistant/markers.test.ts). */
const VOL = 'device__020000001301__self_audio_speaker_set_volume';
const MUTE = 'device__020000001301__self_audio_speaker_mute';

describe('markers mode through the gateway', () => {
  let llm: LlmServer;
  let t: TestGateway;
  const calls: Array<[string, unknown]> = [];
  const device = new ReferenceDevice({
    deviceId: '02:00:00:00:13:01',
    tools: [
      {
        name: 'self.audio_speaker.set_volume',
        description: 'Set the volume',
        properties: { volume: { type: 'integer' } },
        run: (a) => (calls.push(['volume', a['volume']]), true),
      },
      { name: 'self.audio_speaker.mute', description: 'Mute', properties: { on: { type: 'boolean' } }, run: (a) => (calls.push(['mute', a['on']]), true) },
    ],
  });
  beforeAll(async () => {
    llm = await startLlmServer();
    t = await startTestGateway({ assistant: { models: llmModels(llm), defaultModel: 'mk' }, mcp: { deviceTools: 'per_device' } });
    const ready = t.nextEvent('device.ready', device.deviceId);
    await device.connectWebSocket(t.wsUrl);
    await ready;
  });
  afterAll(async () => {
    device.terminate();
    await t.close();
    await llm.close();
  });

  const chat = (message: string) =>
    t.api<{ text: string; toolCalls: Array<{ name: string; arguments: unknown; isError: boolean }> }>('POST', '/v1/assistant/chat', { message });

  it('describes the tools in the prompt, runs JSON and XML calls (typed), and sends "Tool Result" sections', async () => {
    llm.script([
      {
        text: `I'll do both.\n[TOOL_CALL]\n{"name": "${VOL}", "arguments": {"volume": 25}}\n[END_TOOL_CALL]\n<tool_call name="${MUTE}"><argument name="on">false</argument></tool_call>`,
      },
      { text: 'Volume 25, not muted.' },
    ]);
    llm.requests.length = 0;
    calls.length = 0;
    const r = await chat('volume 25 and unmute');
    expect(r.body.text).toBe('Volume 25, not muted.');
    expect(r.body.toolCalls.map((c) => [c.name, c.arguments, c.isError])).toEqual([
      [VOL, { volume: 25 }, false],
      [MUTE, { on: false }, false],
    ]);
    expect(calls).toEqual([
      ['volume', 25],
      ['mute', false],
    ]);
    const first = llm.requests[0]!;
    expect(first.body['tools']).toBeUndefined();
    expect(first.system).toContain(`- ${VOL}: `);
    expect(first.system).toContain('[TOOL_CALL]');
    const msgs = llm.requests[1]!.body['messages'] as Array<{ role: string; content: string }>;
    expect(msgs.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
    expect(msgs[2]!.content).toContain('[TOOL_CALL]');
    expect(msgs[3]!.content).toContain(`## Tool Result: ${VOL}\n\`\`\`\ntrue\n\`\`\``);
    expect(msgs[3]!.content).toContain(`## Tool Result: ${MUTE}`);
    expect(msgs[3]!.content).toMatch(/Answer the user's question from the tool results above\.$/);
  });
});
