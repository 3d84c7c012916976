import { describe, expect, it } from 'vitest';
import { ANSWER_FROM_RESULTS, coerce, describeTools, MarkerModel, parseMarkers, toText } from '../../src/assistant/markers.js';
import type { ModelProvider, ModelReply, ModelRequest } from '../../src/assistant/types.js';

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

/** A model double: answers with the scripted texts in order (streamed in small pieces), and keeps every request. */
function scriptedModel(texts: string[]): ModelProvider & { requests: ModelRequest[] } {
  const requests: ModelRequest[] = [];
  return {
    requests,
    async complete(req: ModelRequest): Promise<ModelReply> {
      requests.push(structuredClone({ ...req, signal: undefined, onText: undefined }) as unknown as ModelRequest);
      const text = texts.shift();
      if (text === undefined) throw new Error('the model double ran out of replies');
      for (let i = 0; i < text.length; i += 5) req.onText?.(text.slice(i, i + 5));
      return { text, toolCalls: [], usage: { inputTokens: 1, outputTokens: 1 } };
    },
  };
}

const request = (over: Partial<ModelRequest> = {}): ModelRequest => ({
  system: 'You are a voice assistant.',
  messages: [{ role: 'user', content: 'volume 25 and unmute' }],
  tools: [
    { name: VOL, description: 'Set the volume', parameters: { type: 'object', properties: { volume: { type: 'integer' } } } },
    { name: MUTE, description: 'Mute', parameters: { type: 'object', properties: { on: { type: 'boolean' } } } },
  ],
  toolChoice: 'auto',
  signal: new AbortController().signal,
  ...over,
});

describe('MarkerModel (toolMode: markers)', () => {
  it('describes the tools in the prompt instead of sending them, and returns JSON and XML calls typed', async () => {
    const inner = scriptedModel([
      `I'll do both.\n[TOOL_CALL]\n{"name": "${VOL}", "arguments": {"volume": 25}}\n[END_TOOL_CALL]\n<tool_call name="${MUTE}"><argument name="on">false</argument></tool_call>`,
    ]);
    const r = await new MarkerModel(inner).complete(request());
    expect(r.toolCalls).toEqual([
      { id: 'm1', name: VOL, arguments: { volume: 25 } },
      { id: 'm2', name: MUTE, arguments: { on: false } },
    ]);
    expect(r.usage).toEqual({ inputTokens: 1, outputTokens: 1 });
    const sent = inner.requests[0]!;
    expect(sent.tools).toEqual([]);
    expect(sent.system.startsWith('You are a voice assistant.\n\nYou can use these tools:')).toBe(true);
    expect(sent.system).toContain(`- ${VOL}: `);
    expect(sent.system).toContain('[TOOL_CALL]');
  });

  it('a reply without markers is the answer', async () => {
    const text = 'Hello! <b>Nothing</b> to do [really].';
    const r = await new MarkerModel(scriptedModel([text])).complete(request());
    expect(r).toMatchObject({ text, toolCalls: [] });
  });

  it('reports a malformed marker to the model once, then takes it as text', async () => {
    const bad = '[TOOL_CALL]{"name": oops}[END_TOOL_CALL]';
    const inner = scriptedModel([bad, bad]);
    const r = await new MarkerModel(inner).complete(request());
    expect(r.text).toBe(bad);
    expect(r.toolCalls).toEqual([]);
    expect(inner.requests).toHaveLength(2);
    const last = inner.requests[1]!.messages.at(-1)!;
    expect(last.content).toMatch(/could not be read/);
    expect(r.usage).toEqual({ inputTokens: 2, outputTokens: 2 });
  });

  it('streams the words before a marker, never the marker; a plain answer streams whole', async () => {
    const deltas: string[] = [];
    await new MarkerModel(scriptedModel([`Let me check. [TOOL_CALL]{"name": "${VOL}", "arguments": {"volume": 9}}[END_TOOL_CALL]`])).complete(
      request({ onText: (d) => deltas.push(d) }),
    );
    expect(deltas.join('')).toBe('Let me check. ');
    const plain: string[] = [];
    await new MarkerModel(scriptedModel(['Done: 9. <tool'])).complete(request({ onText: (d) => plain.push(d) }));
    expect(plain.join('')).toBe('Done: 9. <tool');
  });

  it('describes no tools when the model must answer in text, and then finds no calls', async () => {
    const inner = scriptedModel([`[TOOL_CALL]{"name": "${VOL}", "arguments": {}}[END_TOOL_CALL]`]);
    const r = await new MarkerModel(inner).complete(request({ toolChoice: 'none' }));
    expect(r.toolCalls).toEqual([]);
    expect(inner.requests[0]!.system).toBe('You are a voice assistant.');
  });
});

describe('toText and describeTools', () => {
  it('turns tool calls into their text and each run of tool results into one user message of "Tool Result" sections', () => {
    const out = toText(
      [
        { role: 'user', content: 'volume 25 and unmute' },
        { role: 'assistant', content: '[TOOL_CALL]...', toolCalls: [{ id: 'm1', name: VOL, arguments: { volume: 25 } }] },
        { role: 'tool', toolCallId: 'm1', name: VOL, content: 'true', isError: false },
        { role: 'tool', toolCallId: 'm2', name: MUTE, content: 'no such mode', isError: true },
      ],
      'Some tool calls could not be read: x.',
    );
    expect(out.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
    expect(out[1]).toEqual({ role: 'assistant', content: '[TOOL_CALL]...' });
    expect(out[2]!.content).toContain(`## Tool Result: ${VOL}\n\`\`\`\ntrue\n\`\`\``);
    expect(out[2]!.content).toContain(`## Tool Result: ${MUTE} (error)`);
    expect(out[2]!.content.endsWith(`Some tool calls could not be read: x.\n${ANSWER_FROM_RESULTS}`)).toBe(true);
  });

  it('describes nothing without tools, and each tool with its schema otherwise', () => {
    expect(describeTools([])).toBe('');
    const text = describeTools([{ name: 'a', description: '', parameters: { type: 'object' } }]);
    expect(text).toContain('- a: (no description)\n  arguments (JSON Schema): {"type":"object"}');
  });
});
