import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { llmModels } from '../../../test/support/assistant.js';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { nodeServer } from '../../../test/support/hub.js';
import { startLlmServer, type LlmServer } from '../../../test/support/llm-server.js';
import { once, until } from '../../../test/support/wait.js';

const BIN = fileURLToPath(new URL('../../bin/voxgate.mjs', import.meta.url));
const FIXTURE = fileURLToPath(new URL('../fixtures/assistant-mcp-server.mjs', import.meta.url));

/**
 * `voxgate chat` in a real pseudo-terminal: util-linux `script` gives the child a pty and relays what we
 * write to its master side, so "\x03" is a Ctrl-C typed at a terminal in raw mode, as a person types it.
 */
function ptyChat(t: TestGateway): { child: ChildProcessWithoutNullStreams; screen: () => string; exit: Promise<number | null> } {
  const cmd = [process.execPath, BIN, 'chat', '--url', t.baseUrl, '--key', TEST_API_KEY].map((a) => `'${a}'`).join(' ');
  const child = spawn('script', ['-qfec', cmd, '/dev/null'], { stdio: 'pipe', env: { ...process.env, TERM: 'dumb' } });
  let screen = '';
  child.stdout.on('data', (d: Buffer) => (screen += d.toString()));
  child.stderr.on('data', (d: Buffer) => (screen += d.toString()));
  const exit = once<[number | null]>(child, 'exit', 60_000).then(([code]) => code);
  return { child, screen: () => screen, exit };
}

describe('voxgate chat in a terminal', () => {
  let llm: LlmServer;
  let t: TestGateway;
  beforeAll(async () => {
    llm = await startLlmServer();
    t = await startTestGateway({ assistant: { models: llmModels(llm), defaultModel: 'oa' }, mcp: { servers: { fx: nodeServer(FIXTURE) } } });
    await t.gw.hubStarted;
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });

  it('Ctrl-C at a [y/N] confirmation answers no, cancels the turn and gives the prompt back', async () => {
    llm.script([{ toolCalls: [{ name: 'mcp__fx__wipe', arguments: {} }] }, { text: 'Still here.' }]);
    const before = await t.metric('voxgate_assistant_turns_total', { outcome: 'cancelled' });
    const c = ptyChat(t);
    await until(() => c.screen().includes('> '), 'the first prompt');
    c.child.stdin.write('wipe everything\r');
    await until(() => c.screen().includes('[y/N]'), 'the confirmation question');
    c.child.stdin.write('\x03');
    await until(() => c.screen().includes('[turn cancelled]'), 'the turn to be cancelled');
    await until(() => c.screen().slice(c.screen().lastIndexOf('[turn cancelled]')).includes('> '), 'the prompt back');
    expect(await t.metric('voxgate_assistant_turns_total', { outcome: 'cancelled' })).toBe(before + 1);
    // The next line is a new message, not the answer to the dead question.
    c.child.stdin.write('hello\r');
    await until(() => c.screen().includes('◆ Still here.'), 'the next answer');
    const last = llm.requests.at(-1)!.body['messages'] as Array<{ role: string; content: unknown }>;
    expect(JSON.stringify(last.at(-1))).toContain('hello');
    expect(c.screen()).not.toContain("Tool 'mcp__fx__wipe' completed");
    const wiped = await t.api<{ content: Array<{ text: string }> }>('POST', '/v1/tools/mcp__fx__wiped_count/call', { arguments: {} });
    expect(wiped.body.content[0]!.text).toBe('0');
    c.child.stdin.write('/quit\r');
    expect(await c.exit).toBe(0);
  });
});

describe('voxgate chat in a terminal, a confirmation left unanswered', () => {
  let llm: LlmServer;
  let t: TestGateway;
  beforeAll(async () => {
    llm = await startLlmServer();
    t = await startTestGateway({
      assistant: { models: llmModels(llm), defaultModel: 'oa', confirmTimeoutMs: 1500 },
      mcp: { servers: { fx: nodeServer(FIXTURE) } },
    });
    await t.gw.hubStarted;
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });

  it('gives up on the [y/N] question when the gateway stops waiting, without a keypress', async () => {
    llm.script([{ toolCalls: [{ name: 'mcp__fx__wipe', arguments: {} }] }, { text: 'Not wiped.' }, { text: 'Hello again.' }]);
    const c = ptyChat(t);
    await until(() => c.screen().includes('> '), 'the first prompt');
    c.child.stdin.write('wipe everything\r');
    await until(() => c.screen().includes('[y/N]'), 'the confirmation question');
    // Nothing typed: the window closes, the CLI says so and the turn goes on to its answer.
    await until(() => c.screen().includes("[no answer within 2 s: 'mcp__fx__wipe' not run]"), 'the question to be given up');
    await until(() => c.screen().includes('◆ Not wiped.'), 'the rest of the turn');
    await until(() => c.screen().slice(c.screen().lastIndexOf('◆ Not wiped.')).includes('> '), 'the prompt back');
    // The next line is a new message, not a late answer to the closed question.
    c.child.stdin.write('hello\r');
    await until(() => c.screen().includes('◆ Hello again.'), 'the next answer');
    const last = llm.requests.at(-1)!.body['messages'] as Array<{ role: string; content: unknown }>;
    expect(JSON.stringify(last.at(-1))).toContain('hello');
    const wiped = await t.api<{ content: Array<{ text: string }> }>('POST', '/v1/tools/mcp__fx__wiped_count/call', { arguments: {} });
    expect(wiped.body.content[0]!.text).toBe('0');
    c.child.stdin.write('/quit\r');
    expect(await c.exit).toBe(0);
  });
});
