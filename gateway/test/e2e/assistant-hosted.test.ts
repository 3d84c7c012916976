import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatStream, llmModels, openAiToolMessages, until as untilEvent } from '../../../test/support/assistant.js';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { FIXTURE_SERVER, isAlive, nodeServer, untilHub } from '../../../test/support/hub.js';
import { startLlmServer, type LlmServer } from '../../../test/support/llm-server.js';
import { recordingVolumeTool, ReferenceDevice } from '../../../test/support/reference-device.js';
import { deferred, until } from '../../../test/support/wait.js';

/** The assistant with hosted MCP servers: instructions, auto-context, resources, prompts, confirmation, cancellation, tenants. */
const FIXTURE = fileURLToPath(new URL('../fixtures/assistant-mcp-server.mjs', import.meta.url));
const WEATHER_MAIN = fileURLToPath(new URL('../../../mcp_servers/weather/src/main.ts', import.meta.url));
const JMA_FIXTURE = readFileSync(fileURLToPath(new URL('../../../mcp_servers/weather/test/fixtures/130000.json', import.meta.url)), 'utf8');
const KEY_ACME = 'key-acme-0123456789abcdef';
const KEY_GLOBEX = 'key-globex-0123456789abcdef';
const DEV = '02:00:00:00:12:01';
const VOLUME = 'device__020000001201__self_audio_speaker_set_volume';
const count = (s: string, sub: string) => s.split(sub).length - 1;

interface ChatOut {
  conversationId: string;
  text: string;
  toolCalls: Array<{ name: string; isError: boolean }>;
}

describe('assistant with hosted servers', () => {
  let llm: LlmServer;
  let jma: Server;
  let t: TestGateway;
  const volumes: number[] = [];
  const device = new ReferenceDevice({
    deviceId: DEV,
    tools: [recordingVolumeTool(volumes)],
  });

  beforeAll(async () => {
    jma = createServer((req, res) => {
      if (req.url === '/bosai/forecast/data/forecast/130000.json') return res.writeHead(200, { 'content-type': 'application/json' }).end(JMA_FIXTURE);
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => jma.listen(0, '127.0.0.1', resolve));
    llm = await startLlmServer();
    t = await startTestGateway({
      apiKeys: [TEST_API_KEY, KEY_ACME, KEY_GLOBEX],
      apiKeyTenants: { [KEY_ACME]: 'acme', [KEY_GLOBEX]: 'globex' },
      assistant: {
        models: llmModels(llm),
        defaultModel: 'oa',
        confirmTimeoutMs: 300,
        confirmTools: ['note'],
        toolTimeoutMs: 20_000,
        maxConcurrentTurnsPerTenant: 1,
      },
      mcp: {
        deviceTools: 'per_device',
        servers: {
          fx: nodeServer(FIXTURE, { system_instruction: 'FX-SYSTEM', response_instruction: 'FX-RESPONSE', auto_context_tool: ['lookup', 'cancelled_count'] }),
          weather: {
            command: process.execPath,
            args: ['--import', 'tsx', WEATHER_MAIN],
            env: { JMA_BASE_URL: `http://127.0.0.1:${(jma.address() as AddressInfo).port}` },
            response_instruction: 'WEATHER-RESPONSE',
          },
          acmeonly: nodeServer(FIXTURE, { tenants: ['acme'] }),
          // fails at start: skipped, the others serve (seed 000's graceful degradation)
          broken: nodeServer(FIXTURE_SERVER, { env: { FAIL_AT_START: '1' } }),
        },
        maxRestarts: 0,
      },
    });
    const ready = t.nextEvent('device.ready', DEV);
    await device.connectWebSocket(t.wsUrl);
    await Promise.all([ready, t.gw.hubStarted]);
  });
  afterAll(async () => {
    device.terminate();
    const pids = t.gw.hub.childPids();
    await t.close();
    for (const pid of pids) expect(isAlive(pid)).toBe(false);
    await llm.close();
    await new Promise((resolve) => jma.close(resolve));
  });

  it('a weather tool, then a device tool, in one turn; instructions placed once each', async () => {
    llm.script([
      { toolCalls: [{ name: 'mcp__weather__get_forecast', arguments: { location: 'tokyo' } }] },
      {
        toolCalls: [
          { name: VOLUME, arguments: { volume: 20 } },
          { name: 'mcp__weather__get_forecast', arguments: { location: '東京' } },
        ],
      },
      { text: 'Rain tomorrow in Tokyo; I turned the speaker down.' },
    ]);
    llm.requests.length = 0;
    const r = await t.api<ChatOut>('POST', '/v1/assistant/chat', { message: 'Turn the speaker down and tell me the weather in Tokyo' });
    expect(r.body.text).toBe('Rain tomorrow in Tokyo; I turned the speaker down.');
    expect(volumes).toEqual([20]);
    const [first, second, third] = llm.requests;
    expect(openAiToolMessages(second!.body)[0]!.content).toContain('東京');
    // system_instruction always; the auto-context result with its server's response_instruction before the first call
    expect(first!.system).toContain('FX-SYSTEM');
    expect(first!.system).toContain('Context from mcp__fx__lookup');
    expect(first!.system).toContain('facts about Turn the speaker down and tell me the weather in Tokyo');
    expect(count(first!.system, 'FX-RESPONSE')).toBe(1);
    // a response_instruction joins after its server's tool ran, once per turn however often it runs
    expect(first!.system).not.toContain('WEATHER-RESPONSE');
    expect(count(second!.system, 'WEATHER-RESPONSE')).toBe(1);
    expect(count(third!.system, 'WEATHER-RESPONSE')).toBe(1);
    expect(count(third!.system, 'FX-RESPONSE')).toBe(1);
    // the auto-context tool without a string parameter was skipped, with a log line
    expect(t.logs.some((l) => l['tool'] === 'mcp__fx__cancelled_count' && String(l['msg']).includes('auto-context tool skipped'))).toBe(true);
    // the other tenant's server is not offered, nor the one that failed to start
    expect(first!.tools.some((n) => n.startsWith('mcp__acmeonly__'))).toBe(false);
    expect(first!.tools.some((n) => n.startsWith('mcp__broken__'))).toBe(false);
  });

  it('attaches resources and starts from a prompt template', async () => {
    llm.script([{ text: 'Milk, today.' }]);
    llm.requests.length = 0;
    const s = await chatStream(t, { prompt: { name: 'mcp__fx__summarize', arguments: { topic: 'the memo' } }, resources: ['memo://today'] });
    const evs = await untilEvent(s, 'turn.completed');
    expect(evs.find((e) => e.event === 'resource.read')!.data).toMatchObject({ uri: 'memo://today', server: 'fx' });
    expect(evs.find((e) => e.event === 'prompt.used')!.data).toMatchObject({ name: 'mcp__fx__summarize', server: 'fx' });
    expect(llm.requests[0]!.system).toContain("Today's memo: buy milk");
    const msgs = llm.requests[0]!.body['messages'] as Array<{ role: string; content: string }>;
    expect(msgs.at(-1)).toEqual({ role: 'user', content: 'Summarize the memo in one line.' });
    const conv = await t.api<{ messages: Array<{ role: string; content: string }> }>(
      'GET',
      `/v1/assistant/conversations/${String(evs[0]!.data['conversationId'])}`,
    );
    expect(conv.body.messages.map((m) => m.content)).toEqual(['Summarize the memo in one line.', 'Milk, today.']);
    const bad = await t.api<{ code: string }>('POST', '/v1/assistant/chat', { message: 'x', resources: ['memo://nothing-here'] });
    expect(bad.body.code).toBe('NOT_FOUND');
  });

  const wipeTurn = async (answer: (turnId: string, callId: string) => Promise<void> | void) => {
    llm.script([{ toolCalls: [{ name: 'mcp__fx__wipe', arguments: {} }] }, { text: 'ok' }]);
    llm.requests.length = 0;
    const s = await chatStream(t, { message: 'wipe my notes' });
    const started = (await s.events.next()).data;
    const ask = (await untilEvent(s, 'confirmation.required')).at(-1)!.data;
    expect(ask['name']).toBe('mcp__fx__wipe');
    await answer(String(started['turnId']), String(ask['callId']));
    const result = (await untilEvent(s, 'tool.result')).at(-1)!.data;
    await untilEvent(s, 'turn.completed');
    return { result, modelSaw: openAiToolMessages(llm.requests[1]!.body)[0]!.content };
  };

  it('asks before a destructive tool: approve runs it, deny and no answer do not, and the model is told', async () => {
    const approved = await wipeTurn(async (turnId, callId) => {
      const r = await t.api('POST', `/v1/assistant/turns/${turnId}/confirmations/${callId}`, { approve: true });
      expect(r.status).toBe(204);
    });
    expect(approved.result['isError']).toBe(false);
    expect(approved.modelSaw).toBe('wiped (1)');
    const denied = await wipeTurn(async (turnId, callId) => {
      // another tenant cannot answer it
      const other = await t.api<{ code: string }>('POST', `/v1/assistant/turns/${turnId}/confirmations/${callId}`, { approve: true }, { apiKey: KEY_GLOBEX });
      expect(other.status).toBe(404);
      await t.api('POST', `/v1/assistant/turns/${turnId}/confirmations/${callId}`, { approve: false });
    });
    expect(denied.modelSaw).toMatch(/declined/);
    const timedOut = await wipeTurn(() => undefined);
    expect(timedOut.modelSaw).toMatch(/declined/);
    const wiped = await t.api<{ content: Array<{ text: string }> }>('POST', '/v1/tools/mcp__fx__wiped_count/call', {});
    expect(wiped.body.content[0]!.text).toBe('1');
    // a tool listed in assistant.confirmTools needs a yes too; without a stream nobody can give it
    llm.script([{ toolCalls: [{ name: 'mcp__fx__note', arguments: { text: 'x' } }] }, { text: 'I could not.' }]);
    llm.requests.length = 0;
    const r = await t.api<ChatOut>('POST', '/v1/assistant/chat', { message: 'note x' });
    expect(r.body.toolCalls.find((c) => c.name === 'mcp__fx__note')).toMatchObject({ isError: true });
    expect(openAiToolMessages(llm.requests[1]!.body)[0]!.content).toMatch(/declined/);
  });

  it('cancels mid-tool: the upstream call is cancelled and nothing is left running', async () => {
    llm.script([{ toolCalls: [{ name: 'mcp__fx__wait_forever', arguments: {} }] }, { text: 'never asked' }]);
    llm.requests.length = 0;
    const s = await chatStream(t, { message: 'wait' });
    const turnId = String((await s.events.next()).data['turnId']);
    await untilEvent(s, 'tool.call');
    const counter = async (tool: string) =>
      (await t.api<{ content: Array<{ text: string }> }>('POST', `/v1/tools/mcp__fx__${tool}/call`, {})).body.content[0]!.text;
    await until(async () => (await counter('started_count')) === '1', 'the upstream tool to run');
    expect((await t.api('DELETE', `/v1/assistant/turns/${turnId}`, undefined, { apiKey: KEY_ACME })).status).toBe(404);
    expect((await t.api('DELETE', `/v1/assistant/turns/${turnId}`)).status).toBe(204);
    const failed = (await untilEvent(s, 'turn.failed')).at(-1)!.data;
    expect(failed['code']).toBe('CANCELLED');
    await s.ended;
    // the server got notifications/cancelled and its handler ended
    await until(async () => (await counter('cancelled_count')) === '1', 'the upstream call to be cancelled');
    expect(llm.requests).toHaveLength(1);
    expect((await t.api('DELETE', `/v1/assistant/turns/${turnId}`)).status).toBe(404);
  });

  it('cancels mid-stream when the caller disconnects: the model request is aborted', async () => {
    const never = deferred();
    llm.script([{ text: 'a long answer that never ends', hold: never.promise }]);
    llm.requests.length = 0;
    const before = await t.metric('voxgate_assistant_turns_total', { outcome: 'cancelled' });
    const s = await chatStream(t, { message: 'talk' });
    await untilEvent(s, 'text.delta');
    s.abort();
    await llm.requests[0]!.aborted;
    await until(async () => (await t.metric('voxgate_assistant_turns_total', { outcome: 'cancelled' })) === before + 1, 'the turn to count as cancelled');
    expect(t.logs.some((l) => l['msg'] === 'assistant turn cancelled' && l['reason'] === 'the caller disconnected')).toBe(true);
    await until(() => llm.openConnections() === 0, 'no model connection left open');
  });

  it('caps turns running at once per tenant, so one tenant cannot starve another', async () => {
    const asked = deferred();
    llm.script((req) => {
      if (req.body['messages'] && JSON.stringify(req.body['messages']).includes('hold on')) {
        asked.resolve();
        return { hang: true };
      }
      return { text: 'fine' };
    });
    const s = await chatStream(t, { message: 'hold on' }, KEY_ACME);
    const turnId = String((await s.events.next()).data['turnId']);
    await asked.promise;
    const second = await t.api<{ code: string }>('POST', '/v1/assistant/chat', { message: 'me too' }, { apiKey: KEY_ACME });
    expect([second.status, second.body.code]).toEqual([429, 'TOO_MANY_TURNS']);
    const other = await t.api<ChatOut>('POST', '/v1/assistant/chat', { message: 'me too' }, { apiKey: KEY_GLOBEX });
    expect(other.body.text).toBe('fine');
    expect((await t.api('DELETE', `/v1/assistant/turns/${turnId}`, undefined, { apiKey: KEY_ACME })).status).toBe(204);
    await untilEvent(s, 'turn.failed');
  });

  it('keeps conversations per tenant', async () => {
    llm.script([{ text: 'hello acme' }, { text: 'again' }]);
    const a = await t.api<ChatOut>('POST', '/v1/assistant/chat', { message: 'hi' }, { apiKey: KEY_ACME });
    const id = a.body.conversationId;
    expect((await t.api('GET', `/v1/assistant/conversations/${id}`, undefined, { apiKey: KEY_GLOBEX })).status).toBe(404);
    expect((await t.api('GET', `/v1/assistant/conversations/${id}`)).status).toBe(404);
    expect((await t.api<{ code: string }>('POST', '/v1/assistant/chat', { message: 'hi', conversationId: id }, { apiKey: KEY_GLOBEX })).status).toBe(404);
    expect((await t.api('DELETE', `/v1/assistant/conversations/${id}`, undefined, { apiKey: KEY_GLOBEX })).status).toBe(404);
    const own = await t.api<{ messages: unknown[] }>('GET', `/v1/assistant/conversations/${id}`, undefined, { apiKey: KEY_ACME });
    expect(own.body.messages).toHaveLength(2);
    // acme sees its own server's tools
    llm.requests.length = 0;
    await t.api<ChatOut>('POST', '/v1/assistant/chat', { message: 'again', conversationId: id }, { apiKey: KEY_ACME });
    expect(llm.requests[0]!.tools.some((n) => n.startsWith('mcp__acmeonly__'))).toBe(true);
    expect((await t.api('DELETE', `/v1/assistant/conversations/${id}`, undefined, { apiKey: KEY_ACME })).status).toBe(204);
    expect((await t.api('GET', `/v1/assistant/conversations/${id}`, undefined, { apiKey: KEY_ACME })).status).toBe(404);
  });
});

describe('assistant with MCP_ENABLED=false', () => {
  it('drops hosted servers and goes on with the device tools', async () => {
    const llm = await startLlmServer([{ toolCalls: [{ name: VOLUME, arguments: { volume: 5 } }] }, { text: 'done' }]);
    const t = await startTestGateway(
      { assistant: { models: llmModels(llm) }, mcp: { deviceTools: 'per_device', servers: { fx: nodeServer(FIXTURE, { system_instruction: 'FX-SYSTEM' }) } } },
      { MCP_ENABLED: 'false' },
    );
    const d = new ReferenceDevice({
      deviceId: DEV,
      tools: [{ name: 'self.audio_speaker.set_volume', description: 'v', properties: { volume: { type: 'integer' } }, run: () => true }],
    });
    try {
      const ready = t.nextEvent('device.ready', DEV);
      await d.connectWebSocket(t.wsUrl);
      await ready;
      await untilHub(t.gw.hub, () => t.gw.hub.tools({}).length > 0, 'device tools');
      const r = await t.api<ChatOut>('POST', '/v1/assistant/chat', { message: 'quiet' });
      expect(r.body.text).toBe('done');
      expect(r.body.toolCalls[0]!.isError).toBe(false);
      expect(llm.requests[0]!.tools).toEqual([VOLUME]);
      expect(llm.requests[0]!.system).not.toContain('FX-SYSTEM');
    } finally {
      d.terminate();
      await t.close();
      await llm.close();
    }
  });
});
