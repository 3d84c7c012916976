import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { rootRoute } from '../../src/api/root.js';

/** GET / alone, with the docs UI it points to (as buildApi mounts both). */
async function rootPart(version = '1.2.3') {
  const app = Fastify();
  await app.register(swagger, { openapi: { openapi: '3.0.3', info: { title: 'Voxgate API', version } } });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  await app.register(rootRoute, { version });
  await app.ready();
  return app;
}

describe('GET / points people to the docs and the console (issue 9 item 20)', () => {
  it('answers JSON links without a key', async () => {
    const app = await rootPart();
    const res = await app.inject({ method: 'GET', url: '/' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('application/json');
    expect(res.json()).toMatchObject({ name: 'voxgate', version: '1.2.3', links: { docs: '/docs', console: '/console', openapi: '/openapi.json' } });
    await app.close();
  });

  it('answers a browser with a page of links', async () => {
    const app = await rootPart();
    const res = await app.inject({ method: 'GET', url: '/', headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' } });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
    const html = res.body;
    expect(html).toContain('<a href="/docs">');
    expect(html).toContain('<a href="/console">');
    // The link it gives works.
    const docs = await app.inject({ method: 'GET', url: '/docs' });
    expect([200, 302]).toContain(docs.statusCode);
    const page = docs.statusCode === 302 ? await app.inject({ method: 'GET', url: docs.headers.location! }) : docs;
    expect(page.statusCode).toBe(200);
    await app.close();
  });

  it('escapes the version it prints in the page, and leaves itself out of the OpenAPI document', async () => {
    const app = await rootPart('<script>x</script>');
    const res = await app.inject({ method: 'GET', url: '/', headers: { accept: 'text/html' } });
    expect(res.body).not.toContain('<script>');
    expect(res.body).toContain('&#60;script&#62;');
    expect(Object.keys((app.swagger() as { paths?: Record<string, unknown> }).paths ?? {})).not.toContain('/');
    await app.close();
  });
});
