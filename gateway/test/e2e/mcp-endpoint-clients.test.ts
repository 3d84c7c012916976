import {
  Client,
  discoverOAuthProtectedResourceMetadata,
  StreamableHTTPClientTransport,
  type CallToolResult,
  type FetchLike,
  type OAuthClientProvider,
} from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { deferred } from '../../../test/support/wait.js';

describe('/mcp with the SDK client: resumption tokens, and a wrong key reported as such', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  it('the SDK client gets a token, loses the stream, and resumes with it to read the answer sent meanwhile', async () => {
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:0e:01' });
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(t.wsUrl);
    await ready;

    // A network that drops the next POST's SSE stream right after its first event (the priming event with the id).
    let dropNext = false;
    const dropped = deferred<void>();
    const droppingFetch: FetchLike = async (url, init) => {
      const res = await fetch(url, init);
      if (!dropNext || init?.method !== 'POST' || !res.body || !res.headers.get('content-type')?.includes('text/event-stream')) return res;
      dropNext = false;
      const reader = res.body.getReader();
      let sawId = false;
      const body = new ReadableStream<Uint8Array>({
        async pull(c) {
          if (sawId) {
            await reader.cancel();
            c.error(new Error('network dropped'));
            dropped.resolve();
            return;
          }
          const { value, done } = await reader.read();
          if (done) return c.close();
          c.enqueue(value);
          if (new TextDecoder().decode(value).includes('id:')) sawId = true;
        },
      });
      return new Response(body, { status: res.status, headers: res.headers });
    };
    const transport = new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${TEST_API_KEY}` } },
      fetch: droppingFetch,
      reconnectionOptions: { maxRetries: 0, initialReconnectionDelay: 10, maxReconnectionDelay: 10, reconnectionDelayGrowFactor: 1 },
    });
    const client = new Client({ name: 'resumer', version: '1.0.0' });
    client.onerror = () => undefined;
    await client.connect(transport);
    try {
      const tool = `device__${d.deviceId.replace(/:/g, '')}__self_audio_speaker_set_volume`;
      d.holdReplies();
      const token = deferred<string>();
      dropNext = true;
      const first = client.callTool({ name: tool, arguments: { volume: 41 } }, { onresumptiontoken: (id) => token.resolve(id) });
      first.catch(() => undefined);
      const resumeFrom = await token.promise;
      expect(resumeFrom).toMatch(/\S/);
      await dropped.promise;
      await d.waitForMcp((p) => p['method'] === 'tools/call');
      // The device answers while the client has no stream.
      d.releaseReplies();
      const resumed = (await client.callTool({ name: tool, arguments: { volume: 41 } }, { resumptionToken: resumeFrom })) as CallToolResult;
      expect(resumed.isError ?? false).toBe(false);
      expect(d.volume).toBe(41);
    } finally {
      await client.close();
      d.terminate();
    }
  });

  it('a wrong or missing key: the SDK client error names the Voxgate API key; the resource metadata is served and valid', async () => {
    for (const headers of [{ authorization: 'Bearer not-the-key' }, {} as Record<string, string>]) {
      const client = new Client({ name: 'wrong-key', version: '1.0.0' });
      const transport = new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), { requestInit: { headers } });
      const err = await client.connect(transport).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      await client.close().catch(() => undefined);
      expect(err?.message).toMatch(/Voxgate API key (is not valid|is required)/);
    }
    const challenge = (await fetch(`${t.baseUrl}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).headers.get(
      'www-authenticate',
    );
    const url = /resource_metadata="([^"]+)"/.exec(challenge ?? '')?.[1];
    expect(url).toBe(`${t.baseUrl}/.well-known/oauth-protected-resource/mcp`);
    // The SDK's own discovery fetches and validates it (RFC 9728 schema), at both locations.
    for (const resourceMetadataUrl of [url!, `${t.baseUrl}/.well-known/oauth-protected-resource`]) {
      const meta = await discoverOAuthProtectedResourceMetadata(`${t.baseUrl}/mcp`, { resourceMetadataUrl });
      expect(meta.resource).toBe(`${t.baseUrl}/mcp`);
      expect(meta.bearer_methods_supported).toEqual(['header']);
      expect(meta.authorization_servers).toBeUndefined();
      expect(meta.resource_name).toMatch(/API key/);
      expect(meta.resource_documentation).toBe(`${t.baseUrl}/docs`);
    }
  });

  it('a client that signs in with OAuth (as mcp-remote and the Inspector do) and sends a wrong key: the registration refusal it shows names the fix', async () => {
    // mcp-remote and the Inspector give the SDK transport an OAuth provider and the user's static header. On a 401 the
    // SDK reads the resource metadata, finds no authorization server, falls back to the origin and registers at /register.
    const tried: string[] = [];
    const provider: OAuthClientProvider = {
      redirectUrl: 'http://127.0.0.1:1/oauth/callback',
      clientMetadata: { redirect_uris: ['http://127.0.0.1:1/oauth/callback'], client_name: 'oauth-bridge', token_endpoint_auth_method: 'none' },
      clientInformation: () => undefined,
      saveClientInformation: () => undefined,
      tokens: () => undefined,
      saveTokens: () => undefined,
      redirectToAuthorization: (url) => void tried.push(`authorize ${url.href}`),
      saveCodeVerifier: () => undefined,
      codeVerifier: () => 'verifier',
    };
    const recording: FetchLike = (url, init) => {
      tried.push(`${init?.method ?? 'GET'} ${new URL(url).pathname}`);
      return fetch(url, init);
    };
    const client = new Client({ name: 'oauth-bridge', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), {
      authProvider: provider,
      fetch: recording,
      requestInit: { headers: { authorization: 'Bearer not-the-key' } },
    });
    const err = await client.connect(transport).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    await client.close().catch(() => undefined);
    expect(tried).toContain('POST /register');
    expect(tried.some((x) => x.startsWith('authorize'))).toBe(false);
    // What the user reads: not "no route POST /register", but what is wrong and how to fix it.
    expect(err?.message).toMatch(/HTTP 404/);
    expect(err?.message).toMatch(/Voxgate has no OAuth/);
    expect(err?.message).toMatch(/Authorization: Bearer <api key>/);
    expect(err?.message).not.toMatch(/no route/);
    const res = await fetch(`${t.baseUrl}/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(((await res.json()) as { code: string }).code).toBe('NOT_FOUND');
  });
});
