import { describe, expect, it } from 'vitest';
import { authenticate, principalOf, requireApiKey } from '../../src/api/auth.js';
import { apiPart, bearer } from '../../../test/support/api-parts.js';

const KEY = 'operator-key-0123456789';
const TENANT_KEY = 'tenant-key-0123456789ab';
const tenantOf = (k: string) => (k === TENANT_KEY ? 'acme' : undefined);

describe('authenticate', () => {
  it('finds the caller behind a Bearer key, with its tenant and a principal that is not the key', () => {
    expect(authenticate(`Bearer ${KEY}`, [KEY, TENANT_KEY], tenantOf)).toEqual({ principal: principalOf(KEY) });
    expect(authenticate(`Bearer ${TENANT_KEY}`, [KEY, TENANT_KEY], tenantOf)).toEqual({ tenant: 'acme', principal: principalOf(TENANT_KEY) });
    expect(principalOf(KEY)).toMatch(/^key:[A-Za-z0-9_-]{22}$/);
    expect(principalOf(KEY)).not.toContain(KEY);
    expect(principalOf(KEY)).not.toBe(principalOf(TENANT_KEY));
  });

  it('accepts any case of "bearer" and spaces around the key, nothing else', () => {
    expect(authenticate(`bearer   ${KEY}  `, [KEY])).toBeDefined();
    for (const header of [undefined, '', KEY, `Basic ${KEY}`, `Bearer ${KEY} extra`, `Bearer ${KEY.slice(0, -1)}`, `Bearer ${KEY}x`, 'Bearer '])
      expect([header, authenticate(header, [KEY])]).toEqual([header, undefined]);
  });

  it('keeps reading a header it has seen as a fresh one: other keys, a removed key, and many headers', () => {
    const header = `Bearer ${KEY}`;
    expect(authenticate(header, [KEY])).toEqual({ principal: principalOf(KEY) });
    expect(authenticate(header, [KEY])).toEqual({ principal: principalOf(KEY) });
    expect(authenticate(header, [TENANT_KEY])).toBeUndefined();
    expect(authenticate(header, [TENANT_KEY, KEY], tenantOf)).toEqual({ principal: principalOf(KEY) });
    // More headers than are kept (spacing variants of valid keys): every one still answers right.
    for (let i = 0; i < 600; i++)
      expect(authenticate(`Bearer${' '.repeat(1 + (i % 300))}${i % 2 ? KEY : TENANT_KEY}`, [KEY, TENANT_KEY], tenantOf)).toBeDefined();
    expect(authenticate(`Bearer ${KEY}x`, [KEY])).toBeUndefined();
  });

  it('knows no key when none is configured', () => {
    expect(authenticate(`Bearer ${KEY}`, [])).toBeUndefined();
  });
});

describe('requireApiKey', () => {
  async function app(keys: () => readonly string[]) {
    return apiPart(
      async (scope) => {
        requireApiKey(scope, keys, tenantOf);
        scope.get('/v1/whoami', async (req) => req.caller ?? null);
      },
      { keys: null },
    );
  }

  it('sets the caller for the route, and answers 401 with a challenge otherwise', async () => {
    const a = await app(() => [KEY, TENANT_KEY]);
    const ok = await a.inject({ method: 'GET', url: '/v1/whoami', headers: bearer(TENANT_KEY) });
    expect(ok.json()).toEqual({ tenant: 'acme', principal: principalOf(TENANT_KEY) });
    const none = await a.inject('/v1/whoami');
    expect([none.statusCode, none.headers['www-authenticate']]).toEqual([401, 'Bearer realm="voxgate"']);
    expect(none.json()).toMatchObject({ code: 'UNAUTHORIZED', detail: 'send an API key: Authorization: Bearer <key>' });
    const wrong = await a.inject({ method: 'GET', url: '/v1/whoami', headers: bearer('not-the-key-0123456789') });
    expect([wrong.statusCode, wrong.json<{ detail: string }>().detail]).toEqual([401, 'the API key is not valid']);
    // The key never comes back in an answer.
    expect(wrong.body).not.toContain('not-the-key');
    await a.close();
  });

  it('reads the keys per request, so a removed key stops working at once', async () => {
    let keys = [KEY];
    const a = await app(() => keys);
    expect((await a.inject({ method: 'GET', url: '/v1/whoami', headers: bearer(KEY) })).statusCode).toBe(200);
    keys = ['rotated-key-0123456789'];
    expect((await a.inject({ method: 'GET', url: '/v1/whoami', headers: bearer(KEY) })).statusCode).toBe(401);
    expect((await a.inject({ method: 'GET', url: '/v1/whoami', headers: bearer('rotated-key-0123456789') })).statusCode).toBe(200);
    await a.close();
  });
});
