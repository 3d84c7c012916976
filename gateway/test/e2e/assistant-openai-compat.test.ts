import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { llmModels } from '../../../test/support/assistant.js';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startLlmServer, type LlmServer } from '../../../test/support/llm-server.js';
import { recordingVolumeTool, ReferenceDevice } from '../../../test/support/reference-device.js';

/** POST /v1/chat/completions, driven by the official openai client as any OpenAI-compatible chat UI would. */
const VOL = 'device__020000001401__self_audio_speaker_set_volume';

describe('OpenAI-compatible endpoint', () => {
  let llm: LlmServer;
  let t: TestGateway;
  let client: OpenAI;
  const volumes: number[] = [];
  const device = new ReferenceDevice({
    deviceId: '02:00:00:00:14:01',
    tools: [recordingVolumeTool(volumes)],
  });
  beforeAll(async () => {
    llm = await startLlmServer();
    t = await startTestGateway({ assistant: { models: llmModels(llm) }, mcp: { deviceTools: 'per_device' } });
    const ready = t.nextEvent('device.ready', device.deviceId);
    await device.connectWebSocket(t.wsUrl);
    await ready;
    client = new OpenAI({ apiKey: TEST_API_KEY, baseURL: `${t.baseUrl}/v1`, maxRetries: 0 });
  });
  afterAll(async () => {
    device.terminate();
    await t.close();
    await llm.close();
  });

  it('runs the tools server-side and returns only text', async () => {
    llm.script([
      { toolCalls: [{ name: VOL, arguments: { volume: 12 } }], usage: { input: 30, output: 3 } },
      { text: 'Volume set to 12.', usage: { input: 40, output: 4 } },
    ]);
    llm.requests.length = 0;
    const r = await client.chat.completions.create({
      model: 'an',
      messages: [
        { role: 'system', content: 'Be terse.' },
        { role: 'user', content: 'hello' },
        { role: 'assistant', content: 'hi' },
        { role: 'user', content: [{ type: 'text', text: 'volume 12 please' }] },
      ],
    });
    expect(r.object).toBe('chat.completion');
    expect(r.choices[0]!.message.content).toBe('Volume set to 12.');
    expect(r.choices[0]!.message.tool_calls).toBeUndefined();
    expect(r.usage).toMatchObject({ prompt_tokens: 70, completion_tokens: 7, total_tokens: 77 });
    expect(volumes).toEqual([12]);
    // the caller's history and system message reached the model (here: Anthropic Messages)
    expect(llm.requests[0]!.api).toBe('anthropic');
    expect(llm.requests[0]!.system).toContain('Be terse.');
    const msgs = llm.requests[0]!.body['messages'] as Array<{ role: string; content: unknown }>;
    expect(msgs.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
    // stateless: nothing is kept
    expect(t.gw.assistant.conversations.size).toBe(0);
  });

  it('streams chunks, with usage when asked', async () => {
    llm.script([{ toolCalls: [{ name: VOL, arguments: { volume: 13 } }] }, { text: 'Now at 13.' }]);
    const stream = await client.chat.completions.create({
      model: 'oa',
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'volume 13' }],
    });
    let text = '';
    let finish: string | null | undefined;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const c of stream) {
      text += c.choices[0]?.delta.content ?? '';
      finish ??= c.choices[0]?.finish_reason;
      if (c.usage) usage = c.usage;
    }
    expect(text).toBe('Now at 13.');
    expect(finish).toBe('stop');
    expect(usage?.total_tokens).toBeGreaterThan(0);
    expect(volumes.at(-1)).toBe(13);
  });

  it('answers errors the client understands', async () => {
    await expect(client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({
      status: 404,
      message: expect.stringContaining('no assistant model named "nope"'),
    });
    llm.script([{ status: 400, error: 'context too long' }]);
    await expect(client.chat.completions.create({ model: 'oa', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({ status: 502 });
    llm.script([{ status: 400, error: 'context too long' }]);
    const stream = await client.chat.completions.create({ model: 'oa', stream: true, messages: [{ role: 'user', content: 'x' }] });
    await expect(
      (async () => {
        for await (const _c of stream) void _c;
      })(),
    ).rejects.toThrow(/context too long/);
    await expect(client.chat.completions.create({ model: 'oa', messages: [{ role: 'assistant', content: 'x' }] })).rejects.toMatchObject({ status: 400 });
  });

  it('lists the assistant models as OpenAI clients and chat UIs expect (models.list, models.retrieve)', async () => {
    const page = await client.models.list();
    const ids = page.data.map((m) => m.id);
    expect(ids.sort()).toEqual(Object.keys(llmModels(llm)).sort());
    for (const m of page.data) {
      expect(m.object).toBe('model');
      expect(Number.isInteger(m.created)).toBe(true);
      expect(typeof m.owned_by).toBe('string');
    }
    expect(await client.models.retrieve('an')).toMatchObject({ id: 'an', object: 'model', owned_by: 'anthropic' });
    await expect(client.models.retrieve('nope')).rejects.toMatchObject({ status: 404, message: expect.stringContaining('GET /v1/models') });
    const doc = await t.api<{ paths: Record<string, unknown> }>('GET', '/openapi.json');
    expect(Object.keys(doc.body.paths)).toEqual(expect.arrayContaining(['/v1/models', '/v1/models/{id}']));
  });

  it('refuses client-side tools and tool_choice "required" with a clear 400 instead of ignoring them', async () => {
    const tools = [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: {} } } }];
    await expect(client.chat.completions.create({ model: 'oa', messages: [{ role: 'user', content: 'x' }], tools })).rejects.toMatchObject({
      status: 400,
      message: expect.stringContaining('client-side `tools` are not supported'),
    });
    await expect(client.chat.completions.create({ model: 'oa', messages: [{ role: 'user', content: 'x' }], tool_choice: 'required' })).rejects.toMatchObject({
      status: 400,
      message: expect.stringContaining('tool_choice "required" is not supported'),
    });
    llm.script([{ text: 'fine' }]);
    const ok = await client.chat.completions.create({ model: 'oa', messages: [{ role: 'user', content: 'x' }], tool_choice: 'auto' });
    expect(ok.choices[0]!.message.content).toBe('fine');
  });
});
