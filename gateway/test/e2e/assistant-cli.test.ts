import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { llmModels } from '../../../test/support/assistant.js';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { nodeServer } from '../../../test/support/hub.js';
import { startLlmServer, type LlmServer } from '../../../test/support/llm-server.js';
import { recordingVolumeTool, ReferenceDevice } from '../../../test/support/reference-device.js';
import { deferred, once, until } from '../../../test/support/wait.js';

/** `voxgate chat` as a real child process, its stdin piped. */
const BIN = fileURLToPath(new URL('../../bin/voxgate.mjs', import.meta.url));
const FIXTURE = fileURLToPath(new URL('../fixtures/assistant-mcp-server.mjs', import.meta.url));
const DEV = '02:00:00:00:15:01';

interface Cli {
  child: ChildProcessWithoutNullStreams;
  out: () => string;
  err: () => string;
  exit: Promise<number | null>;
}

function cli(t: TestGateway, ...args: string[]): Cli {
  const child = spawn(process.execPath, [BIN, 'chat', '--url', t.baseUrl, '--key', TEST_API_KEY, ...args], { stdio: 'pipe' });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exit = once<[number | null]>(child, 'exit', 60_000).then(([code]) => code);
  return { child, out: () => out, err: () => err, exit };
}

describe('voxgate chat', () => {
  let llm: LlmServer;
  let t: TestGateway;
  const volumes: number[] = [];
  const device = new ReferenceDevice({
    deviceId: DEV,
    tools: [recordingVolumeTool(volumes)],
  });
  beforeAll(async () => {
    llm = await startLlmServer();
    t = await startTestGateway({
      assistant: { models: llmModels(llm), defaultModel: 'oa' },
      mcp: { deviceTools: 'per_device', servers: { fx: nodeServer(FIXTURE) } },
    });
    const ready = t.nextEvent('device.ready', DEV);
    await device.connectWebSocket(t.wsUrl);
    await Promise.all([ready, t.gw.hubStarted]);
  });
  afterAll(async () => {
    device.terminate();
    await t.close();
    await llm.close();
  });

  it('chats over piped stdin: commands, a bound device, progress lines, a confirmation, a prompt and a resource', async () => {
    llm.script([
      { toolCalls: [{ name: 'self_audio_speaker_set_volume', arguments: { volume: 7 } }] },
      { text: 'Volume 7.' },
      { toolCalls: [{ name: 'mcp__fx__wipe', arguments: {} }] },
      { text: 'Wiped.' },
      { text: 'One line.' },
    ]);
    llm.requests.length = 0;
    const c = cli(t);
    c.child.stdin.end(
      [
        `/device ${DEV}`,
        '/devices',
        '/tools',
        '/model',
        '/model an',
        'volume 7',
        '/model oa',
        'wipe everything',
        'y',
        '/resource memo://today',
        '/prompt mcp__fx__summarize topic=milk',
        '/bogus',
        '/help',
        '',
      ].join('\n'),
    );
    expect(await c.exit).toBe(0);
    const err = c.err();
    expect(err).toContain(`${DEV}  online  websocket`);
    expect(err).toContain('mcp__fx__wipe');
    expect(err).toMatch(/\* oa {2}\(openai, native\)/);
    expect(err).toContain("[MCP: Detected 1 tool call]\n[MCP: Calling tool 'self_audio_speaker_set_volume']");
    expect(err).toContain("[MCP: Tool 'self_audio_speaker_set_volume' completed]");
    expect(err).toContain("[confirm 'mcp__fx__wipe': yes]");
    expect(err).toContain("[MCP: Tool 'mcp__fx__wipe' completed]");
    expect(err).toContain('[MCP: Fetched resource: memo://today]');
    expect(err).toContain("[MCP: Using prompt template 'mcp__fx__summarize' from server 'fx']");
    expect(err).toContain('unknown command /bogus');
    expect(err).toContain('/prompt <name> [k=v ...]');
    expect(c.out()).toContain('◆ Volume 7.\n');
    expect(c.out()).toContain('◆ Wiped.\n');
    expect(c.out()).toContain('◆ One line.\n');
    expect(volumes).toEqual([7]);
    expect(llm.requests[0]!.api).toBe('anthropic');
    expect(llm.requests[2]!.api).toBe('openai');
    // one conversation throughout: the last request carries the earlier exchanges
    const roles = (llm.requests[4]!.body['messages'] as Array<{ role: string }>).map((m) => m.role);
    expect(roles.filter((r) => r === 'assistant')).toHaveLength(2);
  });

  it('starts a new conversation when the current one is gone', async () => {
    llm.script((_req, i) => {
      // the conversation is deleted behind the CLI's back after the first answer
      if (i === 0) return { text: 'first' };
      return { text: 'fresh start' };
    });
    const c = cli(t);
    c.child.stdin.write('hello\n');
    await until(() => c.out().includes('◆ first'), 'the first answer');
    const id = /"conversationId":"([^"]+)"/.exec(JSON.stringify(t.logs.filter((l) => l['msg'] === 'assistant turn completed').at(-1)))![1]!;
    expect((await t.api('DELETE', `/v1/assistant/conversations/${id}`)).status).toBe(204);
    c.child.stdin.end('are you there?\nstill?\n');
    expect(await c.exit).toBe(0);
    expect(c.err()).toContain('[the conversation is gone; the next message starts a new one]');
    expect(c.out()).toContain('◆ fresh start');
  });

  it('-m answers once; exits non-zero when the turn fails', async () => {
    llm.script([{ text: 'Hello there.' }]);
    const ok = cli(t, '-m', 'hi');
    ok.child.stdin.end();
    expect(await ok.exit).toBe(0);
    expect(ok.out()).toBe('◆ Hello there.\n');
    const bad = cli(t, '-m', 'hi', '--model', 'nope');
    bad.child.stdin.end();
    expect(await bad.exit).toBe(1);
    expect(bad.err()).toContain('MODEL_NOT_FOUND');
    llm.script([{ status: 400, error: 'bad request from the model' }]);
    const failed = cli(t, '-m', 'hi');
    failed.child.stdin.end();
    expect(await failed.exit).toBe(1);
    expect(failed.err()).toContain('MODEL_ERROR');
  });

  it('Ctrl-C cancels the running turn; a second one exits', async () => {
    const asked = deferred();
    llm.script(() => {
      asked.resolve();
      return { hang: true };
    });
    llm.requests.length = 0;
    const before = await t.metric('voxgate_assistant_turns_total', { outcome: 'cancelled' });
    const c = cli(t);
    c.child.stdin.write('talk to me\n');
    await asked.promise;
    c.child.kill('SIGINT');
    await llm.requests[0]!.aborted;
    await until(() => c.err().includes('[turn cancelled]'), 'the CLI to report the cancellation');
    expect(await t.metric('voxgate_assistant_turns_total', { outcome: 'cancelled' })).toBe(before + 1);
    c.child.kill('SIGINT');
    expect(await c.exit).toBe(130);
  });
});
