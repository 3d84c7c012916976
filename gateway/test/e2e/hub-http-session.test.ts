import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestGateway } from '../../../test/support/gateway-harness.js';

const HTTP_FIXTURE = fileURLToPath(new URL('../fixtures/mcp-http-server.mjs', import.meta.url));
interface CallBody {
  content: Array<{ type: string; text?: string }>;
  isError: boolean;
}
const text = (b: CallBody) => b.content.map((c) => c.text ?? '').join('');

/** The HTTP fixture as a child process; resolves with its port once it listens. */
async function startHttpFixture(port = 0): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, [HTTP_FIXTURE], { env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'inherit'] });
  const listening = await new Promise<number>((resolve, reject) => {
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      const m = /listening (\d+)/.exec(buf);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`http fixture exited (${code})`)));
  });
  return { child, port: listening };
}
const stop = (child: ChildProcess) =>
  new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : (child.once('exit', () => resolve()), child.kill('SIGTERM'))));

describe('a Streamable HTTP upstream that restarts', () => {
  const children: ChildProcess[] = [];
  afterAll(async () => {
    for (const c of children) await stop(c);
  });

  it('is re-initialized on HTTP 404 for its session, and the call is retried once', async () => {
    const first = await startHttpFixture();
    children.push(first.child);
    const t = await startTestGateway({
      mcp: { restartBaseDelayMs: 1, servers: { remote: { type: 'http', url: `http://127.0.0.1:${first.port}/mcp`, allow_private_network: true } } },
    });
    try {
      await t.gw.hubStarted;
      const boot1 = text((await t.api<CallBody>('POST', '/v1/tools/mcp__remote__boot/call', { arguments: {} })).body);
      expect(boot1).toMatch(/^[0-9a-f]{8}$/);

      // The server restarts on the same port and forgets every session.
      await stop(first.child);
      const second = await startHttpFixture(first.port);
      children.push(second.child);

      const r = await t.api<CallBody>('POST', '/v1/tools/mcp__remote__boot/call', { arguments: {} });
      expect(r.body.isError).toBe(false);
      const boot2 = text(r.body);
      expect(boot2).toMatch(/^[0-9a-f]{8}$/);
      expect(boot2).not.toBe(boot1);
      const servers = await t.api<{ servers: Array<{ name: string; state: string }> }>('GET', '/v1/mcp/servers');
      expect(servers.body.servers.find((s) => s.name === 'remote')?.state).toBe('ready');
      expect(t.logs.some((l) => String(l['msg']).includes('forgot our session'))).toBe(true);

      // Gone for good: the state says so, and the call is a clear error result.
      await stop(second.child);
      const down = await t.api<CallBody>('POST', '/v1/tools/mcp__remote__boot/call', { arguments: {} });
      expect(down.body.isError).toBe(true);
      const after = (await t.api<{ servers: Array<{ name: string; state: string; lastError: string | null }> }>('GET', '/v1/mcp/servers')).body.servers.find(
        (s) => s.name === 'remote',
      );
      expect(after?.state).toBe('failed');
      expect(after?.lastError).toMatch(/fetch failed|ECONNREFUSED/);

      // Back again: the next call finds it (a failed remote server is retried by calls).
      const third = await startHttpFixture(first.port);
      children.push(third.child);
      const back = await t.api<CallBody>('POST', '/v1/tools/mcp__remote__boot/call', { arguments: {} });
      expect(back.body.isError).toBe(false);
      expect(t.gw.hub.servers({}).find((s) => s.name === 'remote')?.state).toBe('ready');
    } finally {
      await t.close();
    }
  });
});
