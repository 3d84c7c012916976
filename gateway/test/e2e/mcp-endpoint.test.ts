import { request } from 'node:http';
import { Client, StreamableHTTPClientTransport, type CallToolResult } from '@modelcontextprotocol/client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { EVERYTHING_BIN, FIXTURE_SERVER, nodeServer } from '../../../test/support/hub.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { deferred } from '../../../test/support/wait.js';

let mac = 0x40;
const nextMac = () => `02:00:00:00:01:${(mac++).toString(16).padStart(2, '0')}`;
const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');

describe('/mcp: the gateway as an MCP server, driven by the SDK client', () => {
  let t: TestGateway;
  const devices: ReferenceDevice[] = [];
  const clients: Client[] = [];

  const connect = async (opts: { key?: string; listChanged?: () => void; modern?: boolean } = {}) => {
    const client = new Client(
      { name: 'test-host', version: '1.0.0' },
      {
        ...(opts.listChanged ? { listChanged: { tools: { autoRefresh: false, onChanged: () => opts.listChanged!() } } } : {}),
        ...(opts.modern ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {}),
      },
    );
    const transport = new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${opts.key ?? TEST_API_KEY}` } },
    });
    await client.connect(transport);
    clients.push(client);
    return client;
  };
  const online = async (d: ReferenceDevice) => {
    devices.push(d);
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(t.wsUrl);
    await ready;
    return d;
  };

  beforeAll(async () => {
    t = await startTestGateway({
      mcp: {
        servers: {
          everything: { command: process.execPath, args: [EVERYTHING_BIN, 'stdio'] },
          fixture: nodeServer(FIXTURE_SERVER, { allowed_tools: ['echo'] }),
          utils: { type: 'builtin', tools: ['calculator'] },
        },
        endpoint: { allowedOrigins: ['https://console.example.com'] },
      },
    });
    await t.gw.hubStarted;
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close();
    for (const d of devices.splice(0)) d.terminate();
  });
  afterAll(() => t.close());

  it('lists and calls device tools and upstream tools as an initialize-era MCP host', async () => {
    const d = await online(new ReferenceDevice({ deviceId: nextMac() }));
    const client = await connect();
    expect(client.getServerVersion()?.name).toBe('voxgate');
    const { tools } = await client.listTools();
    const names = tools.map((x) => x.name);
    const compact = d.deviceId.replace(/:/g, '');
    expect(names).toContain(`device__${compact}__self_audio_speaker_set_volume`);
    expect(names).toContain('mcp__everything__echo');
    expect(names).toContain('mcp__utils__calculator');
    expect(names).toEqual(expect.arrayContaining(['devices_list', 'device_call']));
    // user-only device tools are not offered to an LLM
    expect(names.some((n) => n.includes('reboot') || n.includes('get_system_info'))).toBe(false);

    const vol = (await client.callTool({ name: `device__${compact}__self_audio_speaker_set_volume`, arguments: { volume: 33 } })) as CallToolResult;
    expect(vol.isError ?? false).toBe(false);
    expect(d.volume).toBe(33);
    const status = (await client.callTool({ name: 'device_call', arguments: { device_id: d.deviceId, tool: 'self.get_device_status' } })) as CallToolResult;
    expect(text(status)).toContain('"volume":33');
    const listed = (await client.callTool({ name: 'devices_list', arguments: {} })) as CallToolResult;
    expect(text(listed)).toContain(d.deviceId);

    const echo = (await client.callTool({ name: 'mcp__everything__echo', arguments: { message: 'via /mcp' } })) as CallToolResult;
    expect(text(echo)).toContain('via /mcp');
    const calc = (await client.callTool({ name: 'mcp__utils__calculator', arguments: { expression: '6*7' } })) as CallToolResult;
    expect(text(calc)).toBe('42');
  });

  it('reports device and argument failures as tool errors, unknown tools as protocol errors', async () => {
    const d = await online(new ReferenceDevice({ deviceId: nextMac() }));
    const compact = d.deviceId.replace(/:/g, '');
    const client = await connect();
    const bad = (await client.callTool({ name: `device__${compact}__self_audio_speaker_set_volume`, arguments: { volume: 'loud' } })) as CallToolResult;
    expect(bad.isError).toBe(true);
    expect(text(bad)).toMatch(/volume/);
    await expect(client.callTool({ name: 'mcp__nope__nothing', arguments: {} })).rejects.toThrow(/no tool named/);
    const gone = (await client.callTool({ name: 'device_call', arguments: { device_id: '02:00:00:00:09:99', tool: 'x' } })) as CallToolResult;
    expect(gone.isError).toBe(true);
    expect(text(gone)).toMatch(/no device/);
  });

  it('sends notifications/tools/list_changed when a device joins, and the new tools are listed', async () => {
    const changed = deferred();
    const client = await connect({ listChanged: () => changed.resolve() });
    const before = (await client.listTools()).tools.length;
    const d = await online(new ReferenceDevice({ deviceId: nextMac() }));
    await changed.promise;
    const after = (await client.listTools()).tools;
    expect(after.length).toBeGreaterThan(before);
    expect(after.some((x) => x.name.startsWith(`device__${d.deviceId.replace(/:/g, '')}__`))).toBe(true);
  });

  it('serves the stateless 2026-07-28 era too', async () => {
    const client = await connect({ modern: true });
    expect(client.getNegotiatedProtocolVersion()).toBe('2026-07-28');
    const { tools } = await client.listTools();
    expect(tools.map((x) => x.name)).toContain('mcp__fixture__echo');
    const r = (await client.callTool({ name: 'mcp__fixture__echo', arguments: { text: 'modern' } })) as CallToolResult;
    expect(text(r)).toBe('modern');
  });

  it('proxies upstream resources and prompts', async () => {
    const client = await connect();
    const { resources } = await client.listResources();
    expect(resources.length).toBeGreaterThan(0);
    const first = resources[0]!;
    const read = await client.readResource({ uri: first.uri });
    expect(read.contents[0]!.uri).toBe(first.uri);
    const { prompts } = await client.listPrompts();
    const simple = prompts.find((p) => p.name === 'mcp__everything__simple-prompt');
    expect(simple).toBeDefined();
    const got = await client.getPrompt({ name: simple!.name, arguments: {} });
    expect(got.messages.length).toBeGreaterThan(0);

    const http = await t.api<{ resources: Array<{ uri: string; server: string }> }>('GET', '/v1/mcp/resources');
    expect(http.body.resources.find((r) => r.uri === first.uri)?.server).toBe('everything');
    const httpRead = await t.api<{ contents: Array<{ uri: string }>; server: string }>('GET', `/v1/mcp/resources/read?uri=${encodeURIComponent(first.uri)}`);
    expect(httpRead.body.server).toBe('everything');
    expect(httpRead.body.contents[0]!.uri).toBe(first.uri);
    const httpPrompts = await t.api<{ prompts: Array<{ name: string; server: string }> }>('GET', '/v1/mcp/prompts');
    expect(httpPrompts.body.prompts.find((p) => p.name === 'mcp__everything__simple-prompt')?.server).toBe('everything');
    const httpGet = await t.api<{ messages: unknown[] }>('POST', '/v1/mcp/prompts/mcp__everything__simple-prompt/get', {});
    expect(httpGet.body.messages.length).toBeGreaterThan(0);
  });

  it('requires the API key and refuses foreign browser origins with 403', async () => {
    const init = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    };
    const post = (headers: Record<string, string>) =>
      fetch(`${t.baseUrl}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
        body: JSON.stringify(init),
      });
    const noKey = await post({});
    expect(noKey.status).toBe(401);
    expect(noKey.headers.get('www-authenticate')).toMatch(/Bearer/);
    expect(noKey.headers.get('www-authenticate')).toMatch(
      /^Bearer realm="voxgate", resource_metadata="[^"]+", error_description="a Voxgate API key is required/,
    );
    const wrongKey = await post({ authorization: 'Bearer wrong' });
    expect(wrongKey.status).toBe(401);
    // A wrong key is an invalid bearer token; the resource metadata names no authorization server (no OAuth).
    const challenge = wrongKey.headers.get('www-authenticate')!;
    expect(challenge).toMatch(/, error="invalid_token", error_description="the Voxgate API key is not valid"$/);
    expect(challenge).toContain(`resource_metadata="${t.baseUrl}/.well-known/oauth-protected-resource/mcp"`);
    expect(((await wrongKey.json()) as { error: { message: string } }).error.message).toMatch(/API key is not valid/);
    const foreign = await post({ authorization: `Bearer ${TEST_API_KEY}`, origin: 'https://evil.example' });
    expect(foreign.status).toBe(403);
    const listed = await post({ authorization: `Bearer ${TEST_API_KEY}`, origin: 'https://console.example.com' });
    expect(listed.status).toBe(200);
    const same = await post({ authorization: `Bearer ${TEST_API_KEY}`, origin: t.baseUrl });
    expect(same.status).toBe(200);
    // a session is bound to its key
    const sid = listed.headers.get('mcp-session-id')!;
    expect(sid).toBeTruthy();
    const hijack = await fetch(`${t.baseUrl}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sid, authorization: 'Bearer wrong' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    });
    expect(hijack.status).toBe(401);
    expect(await t.metric('voxgate_mcp_endpoint_requests_total', { outcome: 'forbidden_origin' })).toBe(1);
  });

  it('refuses a body nested deeper than 64 levels without a session too: stateless calls, notifications, initialize (red team 3)', async () => {
    // Only a session's transport bounded the depth: without Mcp-Session-Id the SDK's handler overflowed its stack (500).
    const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
    const bodies = [
      `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"mcp__utils__calculator","arguments":{"expression":${deep(5000)}}}}`,
      `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":${deep(5000)}}}`,
      `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":${deep(5000)},"clientInfo":{"name":"x","version":"1"}}}`,
      `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":${deep(65)}}}`,
    ];
    const before = await t.metric('voxgate_mcp_endpoint_requests_total', { outcome: 'too_deep' });
    for (const body of bodies) {
      const res = await fetch(`${t.baseUrl}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${TEST_API_KEY}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-06-18',
        },
        body,
      });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { code: number; message: string } }).error).toMatchObject({
        code: -32700,
        message: expect.stringMatching(/deeper than 64/),
      });
    }
    expect(await t.metric('voxgate_mcp_endpoint_requests_total', { outcome: 'too_deep' })).toBe(before + bodies.length);
    // 64 levels still pass.
    const ok = await fetch(`${t.baseUrl}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TEST_API_KEY}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-06-18',
      },
      body: `{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"_meta":{"x":${deep(61)}}}}`,
    });
    expect(ok.status).toBe(200);
  });
});

describe('/mcp sessions are bounded', () => {
  it('refuses sessions past the cap and closes idle ones, which then must initialize again', async () => {
    // The idle window must outlast a busy machine's pause between the client's initialize and its next request
    // (300 ms did not, at load 18): 2 s, and the poll below is only a hang guard.
    const t = await startTestGateway({ mcp: { endpoint: { maxSessions: 1, sessionIdleMs: 2000 } } });
    const open = async () => {
      const client = new Client({ name: 'cap-test', version: '1.0.0' });
      const transport = new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${TEST_API_KEY}` } },
      });
      await client.connect(transport);
      return { client, transport };
    };
    try {
      const first = await open();
      expect(await t.metric('voxgate_mcp_endpoint_sessions')).toBe(1);
      await expect(open()).rejects.toThrow(/Too many MCP sessions/);
      expect(await t.metric('voxgate_mcp_endpoint_requests_total', { outcome: 'session_limit' })).toBe(1);

      // The client goes away without DELETE (its GET stream ends with it): left idle, the session is closed by the
      // sweeper, and its id is then unknown. (A client still holding its GET stream keeps its session.)
      const sessionId = first.transport.sessionId!;
      await first.client.close();
      await expect.poll(() => t.metric('voxgate_mcp_endpoint_sessions'), { timeout: 45_000 }).toBe(0);
      const stale = await fetch(`${t.baseUrl}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${TEST_API_KEY}`,
          accept: 'application/json, text/event-stream',
          'content-type': 'application/json',
          'mcp-session-id': sessionId,
          'mcp-protocol-version': first.transport.protocolVersion!,
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      expect(stale.status).toBe(404);
      expect(await stale.text()).toMatch(/Session not found/);
      const again = await open();
      expect((await again.client.listTools()).tools.map((x) => x.name)).toContain('devices_list');
      await again.client.close();
    } finally {
      await t.close();
    }
  });
});

describe('/mcp session caps per API key and in total', () => {
  it('one key reaching its own cap leaves room for every other key; the total still holds', async () => {
    const other = 'other-api-key-0123456789';
    const t = await startTestGateway({ apiKeys: [TEST_API_KEY, other], mcp: { endpoint: { maxSessions: 3, maxSessionsPerKey: 2 } } });
    const transports = new Map<Client, StreamableHTTPClientTransport>();
    const open = async (key: string) => {
      const client = new Client({ name: 'cap-test', version: '1.0.0' });
      const transport = new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } });
      await client.connect(transport);
      transports.set(client, transport);
      return client;
    };
    const held: Client[] = [];
    try {
      held.push(await open(TEST_API_KEY), await open(TEST_API_KEY));
      await expect(open(TEST_API_KEY)).rejects.toThrow(/Too many MCP sessions for this API key/);
      expect(await t.metric('voxgate_mcp_endpoint_requests_total', { outcome: 'session_limit_key' })).toBe(1);
      // The greedy key did not lock the other tenant out.
      held.push(await open(other));
      expect((await held[2]!.listTools()).tools.length).toBeGreaterThan(0);
      // ...and the total cap still applies to everyone.
      await expect(open(other)).rejects.toThrow(/Too many MCP sessions;/);
      // Closing a session (DELETE) gives the key its slot back.
      await transports.get(held[0]!)!.terminateSession();
      held.push(await open(TEST_API_KEY));
      expect(await t.metric('voxgate_mcp_endpoint_sessions')).toBe(3);
    } finally {
      for (const c of held) await c.close().catch(() => undefined);
      await t.close();
    }
  });

  it('bounds the stateless subscriptions/listen streams per key too, and in all (red team 3)', async () => {
    // 2026-07-28 clients hold a listen stream each; the SDK bounded them only in all (1024): one key took every
    // slot and other tenants' clients were refused ("Subscription limit reached").
    const other = 'other-api-key-0123456789';
    const t = await startTestGateway({ apiKeys: [TEST_API_KEY, other], mcp: { endpoint: { maxSessions: 3, maxSessionsPerKey: 2 } } });
    const held: Client[] = [];
    const listen = async (key: string) => {
      const client = new Client({ name: 'listen-test', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
      held.push(client);
      await client.connect(new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
      return client.listen({ toolsListChanged: true });
    };
    try {
      const mine = [await listen(TEST_API_KEY), await listen(TEST_API_KEY)];
      await expect(listen(TEST_API_KEY)).rejects.toThrow(/Too many subscriptions\/listen streams for this API key/);
      expect(await t.metric('voxgate_mcp_endpoint_requests_total', { outcome: 'listen_limit_key' })).toBe(1);
      // The greedy key did not lock the other key out; the total (maxSessions) still holds.
      await listen(other);
      await expect(listen(other)).rejects.toThrow(/Subscription limit reached/);
      // A closed stream gives the key its place back.
      await mine[0]!.close();
      await expect
        .poll(
          async () =>
            listen(TEST_API_KEY).then(
              () => true,
              () => false,
            ),
          { timeout: 10_000 },
        )
        .toBe(true);
    } finally {
      for (const c of held) await c.close().catch(() => undefined);
      await t.close();
    }
  });
});

/** A raw POST with any Host header (fetch will not send a forged Host). */
function rawPost(baseUrl: string, headers: Record<string, string>, body: unknown): Promise<{ status: number; text: string }> {
  const u = new URL(`${baseUrl}/mcp`);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

describe('/mcp DNS-rebinding protection', () => {
  it('answers only configured host names, and checks Origin against them, not against the request', async () => {
    const t = await startTestGateway({ http: { publicUrl: 'https://voice.example.net/' }, mcp: { endpoint: { allowedHosts: ['gateway.lan'] } } });
    const port = new URL(t.baseUrl).port;
    const init = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    };
    const post = (headers: Record<string, string>) => rawPost(t.baseUrl, { authorization: `Bearer ${TEST_API_KEY}`, ...headers }, init);
    try {
      // A rebound name: the attacker's page and the request agree with each other, and both are refused.
      const rebound = await post({ host: `attacker.example:${port}`, origin: `http://attacker.example:${port}` });
      expect(rebound.status).toBe(403);
      expect(rebound.text).toMatch(/Host is not allowed/);
      expect((await post({ host: `attacker.example:${port}` })).status).toBe(403);
      expect((await post({ host: 'user@gateway.lan' })).status).toBe(403);
      expect(await t.metric('voxgate_mcp_endpoint_requests_total', { outcome: 'forbidden_host' })).toBe(3);

      // Loopback names, the listen address, the public URL's host and configured names are served.
      for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, 'voice.example.net', `GATEWAY.lan:${port}`])
        expect((await post({ host })).status, host).toBe(200);
      // An allowed Host does not make a foreign Origin acceptable.
      expect((await post({ host: `gateway.lan:${port}`, origin: 'http://attacker.example' })).status).toBe(403);
      expect((await post({ host: `127.0.0.1:${port}`, origin: `http://gateway.lan:${port}` })).status).toBe(200);
    } finally {
      await t.close();
    }
  });
});

describe('/mcp DELETE', () => {
  it('accepts Content-Type: application/json with an empty body (as the Python SDK sends) and ends the session', async () => {
    const t = await startTestGateway();
    try {
      const client = new Client({ name: 'delete-test', version: '1.0.0' });
      const transport = new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${TEST_API_KEY}` } },
      });
      await client.connect(transport);
      const sid = transport.sessionId!;
      expect(await t.metric('voxgate_mcp_endpoint_sessions')).toBe(1);
      const del = await fetch(`${t.baseUrl}/mcp`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${TEST_API_KEY}`, 'mcp-session-id': sid, 'content-type': 'application/json' },
        body: '',
      });
      expect(del.status).toBe(200);
      expect(await t.metric('voxgate_mcp_endpoint_sessions')).toBe(0);
      // A malformed JSON body is still refused.
      const bad = await fetch(`${t.baseUrl}/mcp`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: '{"jsonrpc":',
      });
      expect(bad.status).toBe(400);
      await client.close().catch(() => undefined);
    } finally {
      await t.close();
    }
  });
});

describe('/mcp CORS', () => {
  it('answers preflights and exposes Mcp-Session-Id for allowedOrigins only', async () => {
    const allowed = 'https://console.example.com';
    const t = await startTestGateway({ mcp: { endpoint: { allowedOrigins: [allowed] } } });
    const preflight = (origin: string) =>
      fetch(`${t.baseUrl}/mcp`, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type, mcp-session-id' },
      });
    try {
      const ok = await preflight(allowed);
      expect(ok.status).toBe(204);
      expect(ok.headers.get('access-control-allow-origin')).toBe(allowed);
      expect(ok.headers.get('access-control-allow-methods')).toMatch(/POST/);
      expect(ok.headers.get('access-control-allow-headers')?.toLowerCase()).toEqual(expect.stringContaining('mcp-session-id'));
      expect(ok.headers.get('access-control-allow-headers')?.toLowerCase()).toEqual(expect.stringContaining('authorization'));
      const foreign = await preflight('https://evil.example');
      expect(foreign.status).toBe(403);
      expect(foreign.headers.get('access-control-allow-origin')).toBeNull();

      const init = {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'browser', version: '1' } },
      };
      const res = await fetch(`${t.baseUrl}/mcp`, {
        method: 'POST',
        headers: {
          origin: allowed,
          authorization: `Bearer ${TEST_API_KEY}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify(init),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('mcp-session-id')).toBeTruthy();
      expect(res.headers.get('access-control-allow-origin')).toBe(allowed);
      expect(res.headers.get('access-control-expose-headers')).toMatch(/Mcp-Session-Id/);
      await res.body?.cancel();
      // Errors carry the CORS headers too, so the page can read why.
      const unauth = await fetch(`${t.baseUrl}/mcp`, {
        method: 'POST',
        headers: { origin: allowed, 'content-type': 'application/json' },
        body: JSON.stringify(init),
      });
      expect(unauth.status).toBe(401);
      expect(unauth.headers.get('access-control-allow-origin')).toBe(allowed);
    } finally {
      await t.close();
    }
  });
});
