import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';

describe('GET / points people to the docs and the console (issue 9 item 20)', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  it('answers JSON links without a key', async () => {
    const res = await fetch(`${t.baseUrl}/`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/json');
    expect(await res.json()).toMatchObject({ name: 'voxgate', links: { docs: '/docs', console: '/console', openapi: '/openapi.json' } });
  });

  it('answers a browser with a page of links', async () => {
    const res = await fetch(`${t.baseUrl}/`, { headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/html');
    const html = await res.text();
    expect(html).toContain('<a href="/docs">');
    expect(html).toContain('<a href="/console">');
    // The link it gives works.
    expect((await fetch(`${t.baseUrl}/docs`, { redirect: 'follow' })).status).toBe(200);
  });
});
