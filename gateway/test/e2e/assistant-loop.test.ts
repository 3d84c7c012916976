import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatStream, llmModels, LLM_KEY, openAiToolMessages, until } from '../../../test/support/assistant.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startLlmServer, type LlmServer } from '../../../test/support/llm-server.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { deferred, until as untilCheck } from '../../../test/support/wait.js';
import { TEST_API_KEY } from '../../../test/support/gateway-harness.js';

/** The tool loop (seed 000) against a real gateway, simulated devices and a scripted model speaking the real wire formats. */
interface ChatOut {
  conversationId: string;
  turnId: string;
  text: string;
  toolCalls: Array<{ name: string; arguments: Record<string, unknown>; isError: boolean; durationMs: number }>;
  rounds: number;
  usage: { inputTokens: number; outputTokens: number };
}

const A = '02:00:00:00:11:01';
const B = '02:00:00:00:11:02';
const tool = (id: string, name: string) => `device__${id.replace(/:/g, '')}__${name}`;

describe('assistant tool loop', () => {
  let llm: LlmServer;
  let t: TestGateway;
  const volumes: number[] = [];
  const release = deferred();
  const slowStarted = deferred();
  const slowRelease = deferred();
  const bothStarted = { a: deferred(), b: deferred() };
  const devA = new ReferenceDevice({
    deviceId: A,
    tools: [
      {
        name: 'self.audio_speaker.set_volume',
        description: 'Set the volume',
        properties: { volume: { type: 'integer', minimum: 0, maximum: 100 } },
        run: (a) => (volumes.push(Number(a['volume'])), true),
      },
      { name: 'self.wait_for_b', description: 'Waits until B runs too', run: async () => (bothStarted.a.resolve(), await bothStarted.b.promise, 'a done') },
      { name: 'self.hang', description: 'Never answers in time', run: async () => (await release.promise, 'late') },
      {
        name: 'self.broken',
        description: 'Always fails',
        run: () => {
          throw new Error('speaker unplugged');
        },
      },
      { name: 'self.slow', description: 'Answers when released', run: async () => (slowStarted.resolve(), await slowRelease.promise, 'slow done') },
      { name: 'self.reboot', description: 'user only', userOnly: true, run: () => true },
    ],
  });
  const devB = new ReferenceDevice({
    deviceId: B,
    tools: [
      { name: 'self.wait_for_a', description: 'Waits until A runs too', run: async () => (bothStarted.b.resolve(), await bothStarted.a.promise, 'b done') },
    ],
  });

  beforeAll(async () => {
    llm = await startLlmServer();
    t = await startTestGateway({
      assistant: { models: llmModels(llm), defaultModel: 'oa', maxToolRounds: 2, maxToolCallsPerRound: 5, toolTimeoutMs: 1500, modelTimeoutMs: 3000 },
      mcp: { deviceTools: 'per_device' },
    });
    for (const d of [devA, devB]) {
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(t.wsUrl);
      await ready;
    }
  });
  afterAll(async () => {
    release.resolve();
    devA.terminate();
    devB.terminate();
    await t.close();
    await llm.close();
  });

  it('calls a device tool, gives the result to the model and returns its answer; the conversation keeps only the words', async () => {
    llm.script([
      { toolCalls: [{ name: tool(A, 'self_audio_speaker_set_volume'), arguments: { volume: 30 } }], usage: { input: 100, output: 7 } },
      { text: 'The volume is now 30.', usage: { input: 120, output: 9 } },
    ]);
    const r = await t.api<ChatOut>('POST', '/v1/assistant/chat', { message: 'Turn the speaker down to 30' });
    expect(r.status).toBe(200);
    expect(r.body.text).toBe('The volume is now 30.');
    expect(r.body.rounds).toBe(2);
    expect(r.body.usage).toEqual({ inputTokens: 220, outputTokens: 16 });
    expect(r.body.toolCalls).toMatchObject([{ name: tool(A, 'self_audio_speaker_set_volume'), arguments: { volume: 30 }, isError: false }]);
    expect(volumes).toEqual([30]);
    // the model saw the device's tools, never the user-only one, and got the result as a tool message
    expect(llm.requests[0]!.tools).toContain(tool(A, 'self_audio_speaker_set_volume'));
    expect(llm.requests[0]!.tools.some((n) => n.includes('reboot'))).toBe(false);
    expect(llm.requests[0]!.headers['authorization']).toBe(`Bearer ${LLM_KEY}`);
    expect(openAiToolMessages(llm.requests[1]!.body)).toEqual([expect.objectContaining({ content: 'true' })]);
    const conv = await t.api<{ messages: Array<{ role: string; content: string }> }>('GET', `/v1/assistant/conversations/${r.body.conversationId}`);
    expect(conv.body.messages.map((m) => [m.role, m.content])).toEqual([
      ['user', 'Turn the speaker down to 30'],
      ['assistant', 'The volume is now 30.'],
    ]);
    // the next turn sends the history: words only, no tool steps
    llm.script([{ text: 'It is 30.' }]);
    const n = llm.requests.length;
    await t.api<ChatOut>('POST', '/v1/assistant/chat', { message: 'What is it now?', conversationId: r.body.conversationId });
    const msgs = llm.requests[n]!.body['messages'] as Array<{ role: string; content: unknown }>;
    expect(msgs.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'user']);
    expect(await t.metric('voxgate_assistant_turns_total', { outcome: 'completed' })).toBeGreaterThanOrEqual(2);
    expect(await t.metric('voxgate_assistant_tokens_total', { direction: 'input' })).toBeGreaterThanOrEqual(220);
    // no conversation text and no key in log lines above debug
    const loud = t.logs.filter((l) => Number(l['level']) > 20).map((l) => JSON.stringify(l));
    expect(loud.some((l) => l.includes('Turn the speaker down') || l.includes(LLM_KEY))).toBe(false);
  });

  it('streams over SSE with Anthropic Messages: tool_use, tool_result, text deltas', async () => {
    llm.script([{ text: 'Let me.', toolCalls: [{ name: tool(A, 'self_audio_speaker_set_volume'), arguments: { volume: 55 } }] }, { text: 'Set to 55, done.' }]);
    const n = llm.requests.length;
    const s = await chatStream(t, { message: 'volume 55', model: 'an' });
    expect(s.status).toBe(200);
    const evs = await until(s, 'turn.completed');
    const types = evs.map((e) => e.event);
    expect(types[0]).toBe('turn.started');
    expect(types.indexOf('tool.call')).toBeLessThan(types.indexOf('tool.result'));
    const deltas = evs
      .filter((e) => e.event === 'text.delta' && e.data['round'] === 2)
      .map((e) => e.data['text'])
      .join('');
    expect(deltas).toBe('Set to 55, done.');
    expect(evs.at(-1)!.data['text']).toBe('Set to 55, done.');
    expect(llm.requests[n]!.api).toBe('anthropic');
    expect(llm.requests[n]!.stream).toBe(true);
    const second = llm.requests[n + 1]!.body['messages'] as Array<{ role: string; content: Array<{ type: string; content?: string; tool_use_id?: string }> }>;
    const result = second.at(-1)!.content[0]!;
    expect(result).toMatchObject({ type: 'tool_result', content: 'true' });
    expect(volumes.at(-1)).toBe(55);
  });

  it('speaks Gemini too: functionCall, functionResponse with the thought signature, streamed and not', async () => {
    for (const stream of [false, true]) {
      llm.script([{ toolCalls: [{ name: tool(A, 'self_audio_speaker_set_volume'), arguments: { volume: 60 + Number(stream) } }] }, { text: 'Gemini set it.' }]);
      llm.requests.length = 0;
      let text: string;
      if (stream) {
        const s = await chatStream(t, { message: 'volume', model: 'ge' });
        const evs = await until(s, 'turn.completed');
        text = evs
          .filter((e) => e.event === 'text.delta')
          .map((e) => e.data['text'])
          .join('');
      } else text = (await t.api<ChatOut>('POST', '/v1/assistant/chat', { message: 'volume', model: 'ge' })).body.text;
      expect(text).toBe('Gemini set it.');
      expect(volumes.at(-1)).toBe(60 + Number(stream));
      expect(llm.requests.map((r) => [r.api, r.stream])).toEqual([
        ['gemini', stream],
        ['gemini', stream],
      ]);
      expect(llm.requests[0]!.tools).toContain(tool(A, 'self_audio_speaker_set_volume'));
      expect(llm.requests[0]!.system).toContain('voice devices');
      const contents = llm.requests[1]!.body['contents'] as Array<{ role: string; parts: Array<Record<string, unknown>> }>;
      expect(contents.map((c) => c.role)).toEqual(['user', 'model', 'user']);
      expect(contents[1]!.parts[0]).toMatchObject({
        functionCall: { name: tool(A, 'self_audio_speaker_set_volume') },
        thoughtSignature: `sig-${tool(A, 'self_audio_speaker_set_volume')}`,
      });
      expect(contents[2]!.parts[0]).toMatchObject({ functionResponse: { name: tool(A, 'self_audio_speaker_set_volume'), response: { output: 'true' } } });
    }
  });

  it('runs several tool calls of one reply in parallel, on different devices', async () => {
    llm.script([
      {
        toolCalls: [
          { name: tool(A, 'self_wait_for_b'), arguments: {} },
          { name: tool(B, 'self_wait_for_a'), arguments: {} },
        ],
      },
      { text: 'both done' },
    ]);
    const n = llm.requests.length;
    const r = await t.api<ChatOut>('POST', '/v1/assistant/chat', { message: 'both' });
    // each tool waits for the other: run one after the other, they would both time out
    expect(r.body.toolCalls.map((c) => c.isError)).toEqual([false, false]);
    expect(openAiToolMessages(llm.requests[n + 1]!.body).map((m) => m.content)).toEqual(['a done', 'b done']);
  });

  it('stops at maxToolRounds: says so and asks once more with tools disabled (OpenAI and Anthropic)', async () => {
    llm.script((_req, i) => ({
      text: i === 2 ? 'I could only do part of it.' : '',
      toolCalls: [{ name: tool(A, 'self_audio_speaker_set_volume'), arguments: { volume: 10 + i } }],
    }));
    llm.requests.length = 0;
    const r = await t.api<ChatOut>('POST', '/v1/assistant/chat', { message: 'keep going' });
    expect(r.body.rounds).toBe(3);
    expect(r.body.toolCalls).toHaveLength(2);
    expect(r.body.text).toBe('I could only do part of it.');
    expect(llm.requests[0]!.toolChoice).toBe('auto');
    expect(llm.requests[2]!.toolChoice).toBe('none');
    const last = (llm.requests[2]!.body['messages'] as Array<{ role: string; content: string }>).at(-1)!;
    expect(last.role).toBe('user');
    expect(last.content).toMatch(/limit of 2 tool rounds/);
    // Anthropic: the notice joins the tool results in one user message (roles must alternate)
    llm.script((_req, i) => ({
      text: i === 2 ? 'Partly done.' : '',
      toolCalls: [{ name: tool(A, 'self_audio_speaker_set_volume'), arguments: { volume: 20 + i } }],
    }));
    llm.requests.length = 0;
    const a = await t.api<ChatOut>('POST', '/v1/assistant/chat', { message: 'keep going', model: 'an' });
    expect(a.body.text).toBe('Partly done.');
    expect(llm.requests[2]!.toolChoice).toEqual({ type: 'none' });
    const msgs = llm.requests[2]!.body['messages'] as Array<{ role: string; content: Array<{ type: string; text?: string }> }>;
    expect(msgs.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant', 'user']);
    expect(msgs.at(-1)!.content.map((b) => b.type)).toEqual(['tool_result', 'text']);
    expect(msgs.at(-1)!.content[1]!.text).toMatch(/limit of 2 tool rounds/);
  });

  it('turns a tool timeout and a tool error into results the model reads', async () => {
    llm.script([
      {
        toolCalls: [
          { name: tool(A, 'self_broken'), arguments: {} },
          { name: tool(A, 'self_hang'), arguments: {} },
          { name: 'no_such_tool', arguments: {} },
          { name: tool(A, 'self_audio_speaker_set_volume'), arguments: { volume: 'loud' } },
          { name: tool(A, 'self_audio_speaker_set_volume'), arguments: '{"volume": 3' },
        ],
      },
      { text: 'Sorry, the speaker has a problem.' },
    ]);
    llm.requests.length = 0;
    const r = await t.api<ChatOut>('POST', '/v1/assistant/chat', { message: 'try' });
    // The turn is over: let the hung tool finish, whatever the assertions below say (device A's queue).
    release.resolve();
    expect(r.status).toBe(200);
    expect(r.body.text).toBe('Sorry, the speaker has a problem.');
    expect(r.body.toolCalls.map((c) => c.isError)).toEqual([true, true, true, true, true]);
    const results = openAiToolMessages(llm.requests[1]!.body).map((m) => m.content);
    expect(results[0]).toMatch(/speaker unplugged/);
    expect(results[1]).toMatch(/timed out/);
    expect(results[2]).toMatch(/no tool named "no_such_tool"/);
    expect(results[3]).toMatch(/argument "volume"/);
    expect(results[4]).toMatch(/not valid JSON/);
    expect(volumes).not.toContain(3);
    expect(await t.metric('voxgate_assistant_tool_calls_total', { outcome: 'timeout' })).toBeGreaterThanOrEqual(1);
    release.resolve();
  });

  it('runs at most maxToolCallsPerRound calls of one reply; the rest are answered "not run"', async () => {
    const before = volumes.length;
    llm.script([
      { toolCalls: Array.from({ length: 7 }, (_, i) => ({ name: tool(A, 'self_audio_speaker_set_volume'), arguments: { volume: i } })) },
      { text: 'ok' },
    ]);
    llm.requests.length = 0;
    const r = await t.api<ChatOut>('POST', '/v1/assistant/chat', { message: 'many' });
    expect(r.body.toolCalls.map((c) => c.isError)).toEqual([false, false, false, false, false, true, true]);
    expect(volumes.length - before).toBe(5);
    expect(openAiToolMessages(llm.requests[1]!.body).at(-1)!.content).toMatch(/at most 5 tool calls/);
  });

  it('tells the model when a device went offline during the turn', async () => {
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:11:03', tools: [{ name: 'self.light.on', description: 'Light on', run: () => true }] });
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(t.wsUrl);
    await ready;
    llm.script(async (_req, i) => {
      if (i > 0) return { text: 'The lamp is offline.' };
      const off = t.nextEvent('device.offline', d.deviceId);
      d.terminate();
      await off;
      return { toolCalls: [{ name: tool(d.deviceId, 'self_light_on'), arguments: {} }] };
    });
    llm.requests.length = 0;
    const r = await t.api<ChatOut>('POST', '/v1/assistant/chat', { message: 'light on' });
    expect(r.body.text).toBe('The lamp is offline.');
    expect(openAiToolMessages(llm.requests[1]!.body)[0]!.content).toMatch(/offline/);
  });

  it('cancelling during a device tool ends the turn at once; the late result is dropped and the device queue moves on', async () => {
    llm.script([{ toolCalls: [{ name: tool(A, 'self_slow'), arguments: {} }] }, { text: 'never asked' }]);
    llm.requests.length = 0;
    const s = await chatStream(t, { message: 'slow' });
    const turnId = String((await s.events.next()).data['turnId']);
    await slowStarted.promise;
    expect((await t.api('DELETE', `/v1/assistant/turns/${turnId}`)).status).toBe(204);
    const failed = (await until(s, 'turn.failed')).at(-1)!.data;
    expect(failed['code']).toBe('CANCELLED');
    slowRelease.resolve();
    // the device's answer arrives after the turn ended: nobody asks the model again, and the next call runs
    const next = await t.api<{ content: Array<{ text: string }> }>('POST', `/v1/tools/${tool(A, 'self_audio_speaker_set_volume')}/call`, {
      arguments: { volume: 33 },
    });
    expect(next.body.content[0]!.text).toBe('true');
    expect(llm.requests).toHaveLength(1);
  });

  it('binds a turn to a device: its tools first, under short names that map back', async () => {
    llm.script([{ toolCalls: [{ name: 'self_audio_speaker_set_volume', arguments: { volume: 42 } }] }, { text: 'ok' }]);
    llm.requests.length = 0;
    const r = await t.api<ChatOut>('POST', '/v1/assistant/chat', { message: 'quieter', deviceId: A.replace(/:/g, '-') });
    expect(r.body.toolCalls[0]).toMatchObject({ name: 'self_audio_speaker_set_volume', isError: false });
    expect(volumes.at(-1)).toBe(42);
    const names = llm.requests[0]!.tools;
    expect(names[0]).toBe('self_audio_speaker_set_volume');
    expect(names).not.toContain(tool(A, 'self_audio_speaker_set_volume'));
    expect(names).toContain(tool(B, 'self_wait_for_a'));
    expect(llm.requests[0]!.system).toContain(A);
  });

  it('refuses a second turn in a busy conversation; a caller that hangs up cancels its turn quietly', async () => {
    llm.script([{ text: 'first' }]);
    const first = await t.api<ChatOut>('POST', '/v1/assistant/chat', { message: 'hello' });
    const asked = deferred();
    llm.script(() => (asked.resolve(), { hang: true }));
    const before = await t.metric('voxgate_assistant_turns_total', { outcome: 'cancelled' });
    const ac = new AbortController();
    const hung = fetch(`${t.baseUrl}/v1/assistant/chat`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ message: 'hang on', conversationId: first.body.conversationId }),
      signal: ac.signal,
    }).catch(() => 'aborted');
    await asked.promise;
    const busy = await t.api<{ code: string }>('POST', '/v1/assistant/chat', { message: 'me too', conversationId: first.body.conversationId });
    expect([busy.status, busy.body.code]).toEqual([409, 'CONVERSATION_BUSY']);
    ac.abort();
    expect(await hung).toBe('aborted');
    await untilCheck(async () => (await t.metric('voxgate_assistant_turns_total', { outcome: 'cancelled' })) === before + 1, 'the turn to be cancelled');
    expect(t.logs.some((l) => l['msg'] === 'unhandled error')).toBe(false);
    // the conversation is free again and kept only the finished exchange
    llm.script([{ text: 'second' }]);
    const again = await t.api<ChatOut>('POST', '/v1/assistant/chat', { message: 'again', conversationId: first.body.conversationId });
    expect(again.body.text).toBe('second');
    const conv = await t.api<{ messages: Array<{ content: string }> }>('GET', `/v1/assistant/conversations/${first.body.conversationId}`);
    expect(conv.body.messages.map((m) => m.content)).toEqual(['hello', 'first', 'again', 'second']);
  });

  it('toolMode none: the model gets no tools and answers', async () => {
    llm.script([{ text: 'I cannot change devices.' }]);
    llm.requests.length = 0;
    const r = await t.api<ChatOut>('POST', '/v1/assistant/chat', { message: 'volume 1', model: 'no' });
    expect(r.body.text).toBe('I cannot change devices.');
    expect(llm.requests[0]!.body['tools']).toBeUndefined();
  });

  it('maps model failures to problems: MODEL_NOT_FOUND, MODEL_ERROR with the provider message, MODEL_TIMEOUT', async () => {
    const nf = await t.api<{ code: string }>('POST', '/v1/assistant/chat', { message: 'x', model: 'nope' });
    expect([nf.status, nf.body.code]).toEqual([404, 'MODEL_NOT_FOUND']);
    llm.script([{ status: 400, error: 'the model gpt-test does not exist' }]);
    const err = await t.api<{ code: string; detail: string }>('POST', '/v1/assistant/chat', { message: 'x' });
    expect([err.status, err.body.code]).toEqual([502, 'MODEL_ERROR']);
    expect(err.body.detail).toContain('the model gpt-test does not exist');
    // The person reading it learns where the model was asked (fidelity item 10).
    expect(err.body.detail).toContain(`model "oa" (${llm.url}/v1) failed`);
    llm.script([{ hang: true }]);
    const to = await t.api<{ code: string }>('POST', '/v1/assistant/chat', { message: 'x' });
    expect([to.status, to.body.code]).toEqual([504, 'MODEL_TIMEOUT']);
    expect(await t.metric('voxgate_assistant_turns_total', { outcome: 'failed' })).toBeGreaterThanOrEqual(2);
  });
});
