import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { isAlive, startEverything } from '../../../test/support/hub.js';

interface CallBody {
  content: Array<{ type: string; text?: string }>;
  isError: boolean;
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
      mcp: {
        servers: {
          legacy: { type: 'sse', url: `http://127.0.0.1:${port}/sse`, allow_private_network: true, headers_template: { 'X-Api-Key': '${legacy_key}' } },
        },
      },
    });
    try {
      await t.gw.hubStarted;
      const servers = await t.api<{ servers: Array<{ name: string; state: string; type: string; toolCount: number }> }>('GET', '/v1/mcp/servers');
      expect(servers.body.servers[0]).toMatchObject({ name: 'legacy', state: 'ready' });
      expect(servers.body.servers[0]!.toolCount).toBeGreaterThan(3);
      const r = await t.api<CallBody>('POST', '/v1/tools/mcp__legacy__get-sum/call', {
        arguments: { a: 40, b: 2 },
        tokens: { legacy_key: 'secret-legacy-key' },
      });
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
