import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { coerce, parseMarkers } from '../../src/assistant/markers.js';
import { chatStream, llmModels, until as untilEvent } from '../../../test/support/assistant.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startLlmServer, type LlmServer } from '../../../test/support/llm-server.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

/** Seed 003: tool calls written as text markers, for models without function calling. */
const VOL = 'device__020000001301__self_audio_speaker_set_volume';
const MUTE = 'device__020000001301__self_audio_speaker_mute';
const schema = {
  type: 'object',
  properties: { volume: { type: 'integer' }, ratio: { type: 'number' }, on: { type: 'boolean' }, tags: { type: 'array' }, name: { type: 'string' } },
};
const tools = [{ name: VOL, description: 'v', parameters: schema }];

describe('marker parsing', () => {
  it('finds JSON and XML markers, several per reply, in order', () => {
    const text = `Sure.\n[TOOL_CALL]\n{"name": "a", "arguments": {"x": 1}}\n[END_TOOL_CALL]\nand <tool_call name="b">\n  <argument name="y">two</argument>\n</tool_call> then [TOOL_CALL]{"name":"c","arguments":{}}[END_TOOL_CALL]`;
    const p = parseMarkers(text, []);
    expect(p.calls).toEqual([
      { name: 'a', arguments: { x: 1 } },
      { name: 'b', arguments: { y: 'two' } },
      { name: 'c', arguments: {} },
    ]);
    expect(p.malformed).toEqual([]);
    expect(p.firstMarkerAt).toBe(6);
  });

  it('coerces XML argument strings to the schema types; what does not fit stays a string', () => {
    expect(coerce({ volume: '35', ratio: '0.5', on: 'true', tags: '["a"]', name: '42', other: 'x' }, schema)).toEqual({
      volume: 35,
      ratio: 0.5,
      on: true,
      tags: ['a'],
      name: '42',
      other: 'x',
    });
    expect(coerce({ volume: 'loud', on: 'yes' }, schema)).toEqual({ volume: 'loud', on: 'yes' });
    const p = parseMarkers(`<tool_call name="${VOL}"><argument name="volume">35</argument><argument name="name">a &amp; b</argument></tool_call>`, tools);
    expect(p.calls[0]!.arguments).toEqual({ volume: 35, name: 'a & b' });
  });

  it('reports malformed markers and finds none in plain text', () => {
    expect(parseMarkers('just an answer [with brackets] <b>bold</b>', tools)).toEqual({ calls: [], malformed: [], firstMarkerAt: -1 });
    expect(parseMarkers('[TOOL_CALL]{not json}[END_TOOL_CALL]', tools).malformed[0]).toMatch(/not valid/);
    expect(parseMarkers('[TOOL_CALL]{"name":"a"', tools).malformed[0]).toMatch(/without/);
    expect(parseMarkers('<tool_call><argument name="a">1</argument></tool_call>', tools).malformed[0]).toMatch(/name=/);
    expect(parseMarkers('[TOOL_CALL]{"arguments":{}}[END_TOOL_CALL]', tools).malformed[0]).toMatch(/needs/);
  });
});

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

  it('a reply without markers is the answer', async () => {
    llm.script([{ text: 'Hello! <b>Nothing</b> to do [really].' }]);
    const r = await chat('hi');
    expect(r.body.text).toBe('Hello! <b>Nothing</b> to do [really].');
    expect(r.body.toolCalls).toEqual([]);
  });

  it('reports a malformed marker to the model once, then takes it as text', async () => {
    const bad = '[TOOL_CALL]{"name": oops}[END_TOOL_CALL]';
    llm.script([{ text: bad }, { text: bad }]);
    llm.requests.length = 0;
    const r = await chat('do it');
    expect(r.body.text).toBe(bad);
    expect(llm.requests).toHaveLength(2);
    const last = (llm.requests[1]!.body['messages'] as Array<{ role: string; content: string }>).at(-1)!;
    expect(last.content).toMatch(/could not be read/);
  });

  it('streams the words before a marker, never the marker', async () => {
    llm.script([{ text: `Let me check. [TOOL_CALL]{"name": "${VOL}", "arguments": {"volume": 9}}[END_TOOL_CALL]` }, { text: 'Done: 9.' }]);
    const s = await chatStream(t, { message: 'volume 9' });
    const evs = await untilEvent(s, 'turn.completed');
    const round = (n: number) =>
      evs
        .filter((e) => e.event === 'text.delta' && e.data['round'] === n)
        .map((e) => e.data['text'])
        .join('');
    expect(round(1)).toBe('Let me check. ');
    expect(round(2)).toBe('Done: 9.');
  });
});
