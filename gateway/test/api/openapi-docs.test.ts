import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { registerOpenApiDocs } from '../../src/api/openapi-docs.js';

type Doc = { info: { version: string }; paths: Record<string, Record<string, { security?: unknown[]; summary?: string }>> };

/** An app as buildApi lays it out: the docs first, then routes at the root and in a scope whose hook adds `security`. */
async function app() {
  const a = Fastify();
  registerOpenApiDocs(a, '9.8.7');
  a.get('/healthz', { schema: { summary: 'health' } }, async () => ({ ok: true }));
  a.get('/console/*', { schema: { hide: true } }, async () => 'page');
  await a.register(
    async (v1) => {
      v1.addHook('onRoute', (route) => {
        route.schema = { ...route.schema, security: [{ apiKey: [] }] };
      });
      v1.get('/devices/:id', { schema: { summary: 'one device', params: { type: 'object', properties: { id: { type: 'string' } } } } }, async () => ({}));
      v1.post('/calls', { schema: { body: { type: 'object' } } }, async () => ({}));
    },
    { prefix: '/v1' },
  );
  await a.ready();
  return a;
}

describe('/openapi.json and /docs, built on their first request (docs/performance.md, "mcprss")', () => {
  it('describes every route registered after it, with what later hooks set, and leaves hidden ones out', async () => {
    const a = await app();
    try {
      // Nothing of @fastify/swagger is on the app itself: the document lives in the app built on first request.
      expect(a.hasDecorator('swagger')).toBe(false);
      const res = await a.inject({ method: 'GET', url: '/openapi.json' });
      expect(res.statusCode).toBe(200);
      const doc = res.json<Doc>();
      expect(doc.info.version).toBe('9.8.7');
      expect(Object.keys(doc.paths).sort()).toEqual(['/healthz', '/v1/calls', '/v1/devices/{id}']);
      expect(Object.keys(doc.paths['/healthz']!)).toEqual(['get']); // no HEAD twin
      expect(doc.paths['/v1/devices/{id}']!['get']).toMatchObject({ summary: 'one device', security: [{ apiKey: [] }] });
      expect(doc.paths['/v1/calls']!['post']!.security).toEqual([{ apiKey: [] }]);
      expect(doc.paths['/healthz']!['get']!.security).toBeUndefined();
      // The same document again (built once).
      expect((await a.inject({ method: 'GET', url: '/openapi.json' })).json()).toEqual(doc);
    } finally {
      await a.close();
    }
  });

  it('serves the docs UI and its files at /docs', async () => {
    const a = await app();
    try {
      const docs = await a.inject({ method: 'GET', url: '/docs' });
      const page = docs.statusCode === 302 ? await a.inject({ method: 'GET', url: docs.headers.location! }) : docs;
      expect(page.statusCode).toBe(200);
      expect(page.headers['content-type']).toContain('text/html');
      expect(page.body).toContain('swagger');
      const js = await a.inject({ method: 'GET', url: '/docs/static/swagger-ui-bundle.js' });
      expect(js.statusCode).toBe(200);
      expect(js.headers['content-type']).toContain('javascript');
      expect(Number(js.headers['content-length'])).toBe(js.rawPayload.length);
      // HEAD answers as GET does, without a body (the gateway's app makes HEAD twins of its GET routes).
      const head = await a.inject({ method: 'HEAD', url: '/docs/json' });
      expect(head.statusCode).toBe(200);
      expect(head.headers['content-type']).toContain('application/json');
      expect((await a.inject({ method: 'GET', url: '/docs/json' })).json<Doc>().paths['/healthz']).toBeDefined();
      expect((await a.inject({ method: 'GET', url: '/docs/static/no-such-file.js' })).statusCode).toBe(404);
    } finally {
      await a.close();
    }
  });
});
