import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { LAMPS_SPEC as spec } from '../fixtures/lamps-openapi.js';

interface CallBody {
  content: Array<{ type: string; text?: string }>;
  isError: boolean;
  structuredContent?: Record<string, unknown>;
}
const text = (b: CallBody) => b.content.map((c) => c.text ?? '').join('');
const SECRET = 'tok-7f3a9c1e-very-secret';

/** The spec reader and the address rules: ../hub/openapi.test.ts, ../hub/ssrf.test.ts; here, calls through the gateway. */
describe('OpenAPI servers, credentials and the SSRF guard', () => {
  let api: FastifyInstance;
  let apiUrl: string;
  let dir: string;
  let t: TestGateway;
  const seen: Array<{ method: string; url: string; auth?: string; body?: unknown }> = [];

  beforeAll(async () => {
    api = Fastify();
    api.addHook('onRequest', async (req) => {
      seen.push({ method: req.method, url: req.url, ...(req.headers.authorization ? { auth: req.headers.authorization } : {}) });
    });
    api.get<{ Params: { room: string }; Querystring: { all?: string } }>('/rooms/:room/lamps', async (req) => ({
      room: req.params.room,
      all: req.query.all === 'true',
      lamps: ['desk'],
    }));
    api.post<{ Params: { room: string }; Body: Record<string, unknown> }>('/rooms/:room/lamps', async (req, reply) =>
      reply.code(201).send({ created: req.body, room: req.params.room }),
    );
    api.get('/whoami', async (req, reply) =>
      req.headers.authorization === `Bearer ${SECRET}` ? { user: 'alice' } : reply.code(401).send({ error: 'bad token' }),
    );
    await api.listen({ host: '127.0.0.1', port: 0 });
    const addr = api.server.address() as { port: number };
    apiUrl = `http://127.0.0.1:${addr.port}`;
    dir = mkdtempSync(join(tmpdir(), 'voxgate-openapi-'));
    writeFileSync(join(dir, 'lamps.json'), JSON.stringify(spec));
    writeFileSync(
      join(dir, 'mcp.json'),
      JSON.stringify({
        mcpServers: {
          lamps: {
            type: 'openapi',
            openapi_spec: 'lamps.json',
            openapi_base_url: apiUrl,
            headers_template: { Authorization: 'Bearer ${lamps}' },
            allow_private_network: true,
          },
          guarded: { type: 'openapi', openapi_spec: spec, openapi_base_url: apiUrl },
          inline: { type: 'openapi', openapi_spec: spec, openapi_base_url: apiUrl, allow_private_network: true, allowed_tools: ['listLamps'] },
        },
      }),
    );
    t = await startTestGateway({}, { GATEWAY_MCP_CONFIG: join(dir, 'mcp.json') });
    await t.gw.hubStarted;
  });
  afterAll(async () => {
    await t.close();
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('calls with path, query and body parameters', async () => {
    const tokens = { lamps: SECRET };
    const list = await t.api<CallBody>('POST', '/v1/tools/mcp__lamps__listLamps/call', { arguments: { room: 'den room', all: true }, tokens });
    expect(list.body.isError).toBe(false);
    expect(list.body.structuredContent).toEqual({ room: 'den room', all: true, lamps: ['desk'] });
    expect(seen.at(-1)).toMatchObject({ method: 'GET', url: '/rooms/den%20room/lamps?all=true', auth: `Bearer ${SECRET}` });
    const add = await t.api<CallBody>('POST', '/v1/tools/mcp__lamps__post_rooms_room_lamps/call', {
      arguments: { room: 'den', name: 'floor', watts: 9 },
      tokens,
    });
    expect(add.body.isError).toBe(false);
    expect(add.body.structuredContent).toEqual({ created: { name: 'floor', watts: 9 }, room: 'den' });
  });

  it('fills headers_template from the X-Voxgate-Tokens header; 401 comes back as isError with the status', async () => {
    const header = Buffer.from(JSON.stringify({ lamps: SECRET })).toString('base64');
    const res = await fetch(`${t.baseUrl}/v1/tools/mcp__lamps__whoami/call`, {
      method: 'POST',
      headers: { authorization: 'Bearer test-api-key-0123456789', 'content-type': 'application/json', 'x-voxgate-tokens': header },
      body: '{}',
    });
    const ok = (await res.json()) as CallBody;
    expect(ok.structuredContent).toEqual({ user: 'alice' });
    const denied = await t.api<CallBody>('POST', '/v1/tools/mcp__lamps__whoami/call', { tokens: { lamps: 'expired' } });
    expect(denied.status).toBe(200);
    expect(denied.body.isError).toBe(true);
    expect(text(denied.body)).toMatch(/^HTTP 401 \(unauthorized/);
  });

  it('names a missing token clearly, and never logs a token', async () => {
    const missing = await t.api<{ code: string; detail: string; token: string }>('POST', '/v1/tools/mcp__lamps__whoami/call', {});
    expect(missing.status).toBe(400);
    expect(missing.body.code).toBe('MISSING_TOKEN');
    expect(missing.body.detail).toContain('"lamps"');
    const badHeader = await fetch(`${t.baseUrl}/v1/tools/mcp__lamps__whoami/call`, {
      method: 'POST',
      headers: { authorization: 'Bearer test-api-key-0123456789', 'content-type': 'application/json', 'x-voxgate-tokens': 'not base64 json' },
      body: '{}',
    });
    expect(badHeader.status).toBe(400);
    // Log something that carries tokens the way a careless caller would: it must come out redacted.
    t.gw.log.info(
      { tokens: { lamps: SECRET }, req: { headers: { 'x-voxgate-tokens': SECRET } }, server: { headers_template: { Authorization: `Bearer ${SECRET}` } } },
      'redaction probe',
    );
    const probe = t.logs.find((l) => l['msg'] === 'redaction probe')!;
    expect(JSON.stringify(probe)).toContain('[REDACTED]');
    expect(JSON.stringify(t.logs)).not.toContain(SECRET);
  });

  it('refuses private addresses by default (SSRF guard) and applies allowed_tools', async () => {
    const r = await t.api<CallBody>('POST', '/v1/tools/mcp__guarded__listLamps/call', { arguments: { room: 'den' } });
    expect(r.body.isError).toBe(true);
    expect(text(r.body)).toMatch(/refused to connect to 127\.0\.0\.1.*allow_private_network/);
    const tools = await t.api<{ tools: Array<{ name: string }> }>('GET', '/v1/tools');
    const inline = tools.body.tools.map((x) => x.name).filter((n) => n.startsWith('mcp__inline__'));
    expect(inline).toEqual(['mcp__inline__listLamps']);
  });
});
