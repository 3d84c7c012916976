import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, startCompiledGateway, type GatewayProcess } from '../../../test/support/gateway-process.js';

const KEY = 'example-hub-test-key-0123';
const EXAMPLE = join(ROOT, 'examples/hub');

/**
 * examples/hub (issue 9 item 20): what docs/mcp-hub.md shows is a file that ships, and it starts from the
 * repository as `GATEWAY_CONFIG=examples/hub/gateway.config.json npm start` does (the compiled entry npm
 * execs, in the repository root), with nothing from the network.
 */
describe('the hub example', () => {
  let run: GatewayProcess;
  let dataDir: string;
  let base: string;
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(base + path, {
      method,
      headers: { authorization: `Bearer ${KEY}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? null : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'voxgate-example-'));
    // Only what a test must change: free ports and a data dir of its own.
    run = startCompiledGateway({
      GATEWAY_CONFIG: 'examples/hub/gateway.config.json',
      GATEWAY_HTTP_PORT: '0',
      GATEWAY_MQTT_PORT: '0',
      GATEWAY_DATA_DIR: dataDir,
      GATEWAY_API_KEYS: KEY,
    });
    const started = (await run.logLine('voxgate started')) as { http: string };
    base = `http://${started.http}`;
    expect(await run.logLine('MCP hub started')).toMatchObject({ servers: 3, ready: 3 });
  }, 60_000);
  afterAll(async () => {
    run.child.kill('SIGTERM');
    expect((await run.exited).code).toBe(0);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('lists the tools of the built-in, the stdio (weather) and the OpenAPI server', async () => {
    const { status, body } = await api('GET', '/v1/tools');
    expect(status).toBe(200);
    const names = (body['tools'] as Array<{ name: string }>).map((t) => t.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'mcp__utils__current_time',
        'mcp__utils__calculator',
        'mcp__weather__get_forecast',
        'mcp__gateway__health',
        'mcp__gateway__readiness',
        'mcp__gateway__list_devices',
      ]),
    );
  });

  it('answers the weather offline, from the forecast it ships', async () => {
    const { status, body } = await api('POST', '/v1/tools/mcp__weather__get_forecast/call', { arguments: { location: 'tokyo' } });
    expect(status).toBe(200);
    expect(body['isError']).toBe(false);
    expect(JSON.stringify(body['content'])).toContain('気象庁');
    const calc = await api('POST', '/v1/tools/mcp__utils__calculator/call', { arguments: { expression: '6 * 7' } });
    expect(JSON.stringify(calc.body['content'])).toContain('42');
  });

  it('ships every file it names, reaches no host but this one, and is the example docs/mcp-hub.md shows', () => {
    const mcp = JSON.parse(readFileSync(join(EXAMPLE, 'mcp.json'), 'utf8')) as {
      mcpServers: Record<string, { openapi_spec?: string; openapi_base_url?: string }>;
    };
    for (const s of Object.values(mcp.mcpServers)) {
      if (s.openapi_spec) expect(() => readFileSync(join(EXAMPLE, s.openapi_spec!))).not.toThrow();
      if (s.openapi_base_url) expect(new URL(s.openapi_base_url).hostname).toBe('127.0.0.1');
    }
    const docs = readFileSync(join(ROOT, 'docs/mcp-hub.md'), 'utf8');
    const firstJson = /```json\n([\s\S]*?)```/.exec(docs)![1]!;
    expect(JSON.parse(firstJson)).toEqual(mcp);
  });
});
