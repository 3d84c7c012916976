import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../test/support/gateway-harness.js';
import { EVERYTHING_BIN, isAlive } from '../../test/support/hub.js';

interface CallBody {
  content: Array<{ type: string; text?: string }>;
  isError: boolean;
}

/** The TCP port a process listens on, read from /proc (the server is started with PORT=0). */
function listeningPort(pid: number): number | undefined {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      /* closed meanwhile */
    }
  }
  for (const table of ['/proc/net/tcp6', '/proc/net/tcp']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f[3] === '0A' && inodes.has(f[9] ?? '')) return parseInt(f[1]!.split(':')[1]!, 16);
    }
  }
  return undefined;
}

/** server-everything in one of its HTTP modes on a free port; resolves once it listens. */
async function startEverything(mode: 'streamableHttp' | 'sse'): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, [EVERYTHING_BIN, mode], { env: { ...process.env, PORT: '0' }, stdio: ['ignore', 'ignore', 'pipe'] });
  // It writes "listening on port" (streamableHttp) or "is running on port" (sse) to stderr once listening.
  await new Promise<void>((resolve, reject) => {
    let buf = '';
    child.stderr!.on('data', (d: Buffer) => {
      buf += d.toString();
      if (/listening on port|is running on port/.test(buf)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`server-everything exited (${code}): ${buf}`)));
  });
  const port = listeningPort(child.pid!);
  if (!port) throw new Error('could not find the port server-everything listens on');
  return { child, port };
}

describe('server-everything over Streamable HTTP', () => {
  let child: ChildProcess;
  let url: string;
  let t: TestGateway;

  beforeAll(async () => {
    const started = await startEverything('streamableHttp');
    child = started.child;
    const port = started.port;
    url = `http://127.0.0.1:${port}/mcp`;
    t = await startTestGateway({
      mcp: {
        servers: {
          remote: { url, allow_private_network: true, headers_template: { 'X-Api-Key': '${remote_key}' } },
          guarded: { type: 'http', url },
          old: { type: 'sse', url: `http://127.0.0.1:${port}/sse`, allow_private_network: true },
        },
      },
    });
    await t.gw.hubStarted;
  });
  afterAll(async () => {
    await t?.close();
    child.kill('SIGKILL');
  });

  it('lists and calls the remote tools; the default SSRF guard refuses a loopback URL', async () => {
    const servers = await t.api<{ servers: Array<{ name: string; state: string; lastError: string | null; toolCount: number }> }>('GET', '/v1/mcp/servers');
    const by = Object.fromEntries(servers.body.servers.map((s) => [s.name, s]));
    expect(by['remote']!.state).toBe('ready');
    expect(by['remote']!.toolCount).toBeGreaterThan(3);
    expect(by['guarded']!.state).toBe('failed');
    expect(by['guarded']!.lastError).toMatch(/refused to connect to 127\.0\.0\.1/);
    // this server has no SSE endpoint: a clear failure, the rest unaffected
    expect(by['old']!.state).toBe('failed');

    const r = await t.api<CallBody>('POST', '/v1/tools/mcp__remote__get-sum/call', { arguments: { a: 20, b: 22 }, tokens: { remote_key: 'k' } });
    expect(r.body.isError).toBe(false);
    expect(r.body.content[0]!.text).toContain('42');
    const missing = await t.api<{ code: string }>('POST', '/v1/tools/mcp__remote__get-sum/call', { arguments: { a: 1, b: 2 } });
    expect(missing.body.code).toBe('MISSING_TOKEN');
  });

  it('a remote server that goes away yields isError results, not failures', async () => {
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));
    expect(isAlive(child.pid!)).toBe(false);
    const r = await t.api<CallBody>('POST', '/v1/tools/mcp__remote__echo/call', { arguments: { message: 'x' }, tokens: { remote_key: 'k' } });
    expect(r.status).toBe(200);
    expect(r.body.isError).toBe(true);
    expect(r.body.content[0]!.text).toMatch(/tool server "remote"/);
  });
});

describe('server-everything over SSE (the older HTTP+SSE transport)', () => {
  it('connects, lists and calls its tools, with headers from the caller’s tokens', async () => {
    const { child, port } = await startEverything('sse');
    const t = await startTestGateway({
      mcp: { servers: { legacy: { type: 'sse', url: `http://127.0.0.1:${port}/sse`, allow_private_network: true, headers_template: { 'X-Api-Key': '${legacy_key}' } } } },
    });
    try {
      await t.gw.hubStarted;
      const servers = await t.api<{ servers: Array<{ name: string; state: string; type: string; toolCount: number }> }>('GET', '/v1/mcp/servers');
      expect(servers.body.servers[0]).toMatchObject({ name: 'legacy', state: 'ready' });
      expect(servers.body.servers[0]!.toolCount).toBeGreaterThan(3);
      const r = await t.api<CallBody>('POST', '/v1/tools/mcp__legacy__get-sum/call', { arguments: { a: 40, b: 2 }, tokens: { legacy_key: 'secret-legacy-key' } });
      expect(r.status).toBe(200);
      expect(r.body.isError).toBe(false);
      expect(r.body.content[0]!.text).toContain('42');
      expect(JSON.stringify(t.logs)).not.toContain('secret-legacy-key');
    } finally {
      await t.close();
      child.kill('SIGKILL');
    }
  });
});
