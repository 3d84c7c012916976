import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { llmModels } from '../../../test/support/assistant.js';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startLlmServer, type LlmServer } from '../../../test/support/llm-server.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { once } from '../../../test/support/wait.js';

/**
 * `voxgate chat` in an operator's terminal shows what devices, tools and models send, and obeys none of it: a device's
 * tool description and a model's answer carrying terminal escapes (a title change, a screen clear, a bell) and a
 * right-to-left override reach the terminal as U+FFFD.
 */
const BIN = fileURLToPath(new URL('../../bin/voxgate.mjs', import.meta.url));
const DEV = '02:00:00:00:15:02';
const ESCAPES = '\u001b]0;pwned\u0007\u001b[2J\u009b31m\u202e';
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

describe('voxgate chat shows what a device or a model sends, obeying none of it', () => {
  let llm: LlmServer;
  let t: TestGateway;
  const device = new ReferenceDevice({
    deviceId: DEV,
    tools: [{ name: 'self.lamp.toggle', description: `Toggle the lamp${ESCAPES} now`, run: () => true }],
  });
  beforeAll(async () => {
    llm = await startLlmServer();
    t = await startTestGateway({ assistant: { models: llmModels(llm), defaultModel: 'oa' }, mcp: { deviceTools: 'per_device' } });
    const ready = t.nextEvent('device.ready', DEV);
    await device.connectWebSocket(t.wsUrl);
    await ready;
  });
  afterAll(async () => {
    device.terminate();
    await t.close();
    await llm.close();
  });

  it('a tool description and an answer with escapes print as U+FFFD, the rest of the text kept', async () => {
    llm.script([{ text: `Done${ESCAPES}.\nNext line.` }]);
    const child = spawn(process.execPath, [BIN, 'chat', '--url', t.baseUrl, '--key', TEST_API_KEY], { stdio: 'pipe' });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exit = once<[number | null]>(child, 'exit', 60_000);
    child.stdin.end(['/tools', 'toggle it', '/quit', ''].join('\n'));
    const [code] = await exit;
    expect(code, err).toBe(0);
    const all = out + err;
    expect(all).toContain('Toggle the lamp\ufffd');
    expect(all).toContain('Done\ufffd');
    expect(all).toContain('Next line.');
    expect(all).not.toMatch(CONTROLS);
  });
});
