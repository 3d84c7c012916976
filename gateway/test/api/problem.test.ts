import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { HTTP_PROBLEMS, httpStatusOf, registerProblemHandlers } from '../../src/api/problem.js';
import { jsonSchema } from '../../src/api/schemas.js';
import { ERROR_CODES, GatewayError } from '../../src/errors.js';

/** A bare app with the problem handlers and routes that fail every way a route can. */
async function app() {
  const a = Fastify({ bodyLimit: 1024 });
  registerProblemHandlers(a);
  a.get('/domain', async () => {
    throw new GatewayError('DEVICE_BUSY', 'the device has 8 calls waiting', { retryAfterSeconds: 2.2, deviceId: 'aa:bb' });
  });
  a.get('/plain', async () => {
    throw new GatewayError('DEVICE_OFFLINE', 'device aa:bb is offline');
  });
  a.get('/bug', async () => {
    throw new Error('secret internals: token=abc');
  });
  a.post('/typed', { schema: { body: jsonSchema(z.object({ n: z.number().int() })) } }, async () => ({ ok: true }));
  await a.ready();
  return a;
}

describe('problem+json for every error (api/problem.ts)', () => {
  it('maps every domain error code to an HTTP status and a title', () => {
    for (const code of ERROR_CODES) {
      const p = HTTP_PROBLEMS[code];
      expect([code, p.status >= 400 && p.status < 600, p.title.length > 0]).toEqual([code, true, true]);
    }
    expect(httpStatusOf('DEVICE_NOT_FOUND')).toBe(404);
    expect(httpStatusOf('DEVICE_TIMEOUT')).toBe(504);
    expect(httpStatusOf('CANCELLED')).toBe(499);
  });

  it('answers a GatewayError with its code, detail, extra fields and the path without its query', async () => {
    const a = await app();
    const r = await a.inject('/plain?secret=1');
    expect(r.statusCode).toBe(503);
    expect(r.headers['content-type']).toContain('application/problem+json');
    expect(r.json()).toEqual({
      type: 'urn:voxgate:error:DEVICE_OFFLINE',
      title: 'Device offline',
      status: 503,
      detail: 'device aa:bb is offline',
      code: 'DEVICE_OFFLINE',
      instance: '/plain',
    });
    expect(r.headers['retry-after']).toBeUndefined();
    await a.close();
  });

  it('tells a caller asked to come back when, rounded up to whole seconds', async () => {
    const a = await app();
    const r = await a.inject('/domain');
    expect(r.statusCode).toBe(429);
    expect(r.headers['retry-after']).toBe('3');
    expect(r.json()).toMatchObject({ code: 'DEVICE_BUSY', retryAfterSeconds: 2.2, deviceId: 'aa:bb' });
    await a.close();
  });

  it('turns validation failures, unknown routes, oversized and unsupported bodies into their codes', async () => {
    const a = await app();
    const invalid = await a.inject({ method: 'POST', url: '/typed', payload: { n: 'one' } });
    expect([invalid.statusCode, invalid.json<{ code: string }>().code]).toEqual([400, 'INVALID_REQUEST']);
    const missing = await a.inject('/nowhere?x=1');
    expect([missing.statusCode, missing.json<{ code: string; detail: string }>()]).toEqual([
      404,
      expect.objectContaining({ code: 'NOT_FOUND', detail: 'no route GET /nowhere' }),
    ]);
    const big = await a.inject({ method: 'POST', url: '/typed', payload: { n: 1, pad: 'x'.repeat(2000) } });
    expect([big.statusCode, big.json<{ code: string }>().code]).toEqual([413, 'PAYLOAD_TOO_LARGE']);
    const xml = await a.inject({ method: 'POST', url: '/typed', payload: '<n>1</n>', headers: { 'content-type': 'application/xml' } });
    expect([xml.statusCode, xml.json<{ code: string }>().code]).toEqual([415, 'UNSUPPORTED_MEDIA_TYPE']);
    const broken = await a.inject({ method: 'POST', url: '/typed', payload: '{"n":', headers: { 'content-type': 'application/json' } });
    expect([broken.statusCode, broken.json<{ code: string }>().code]).toEqual([400, 'INVALID_REQUEST']);
    await a.close();
  });

  it('answers an unexpected error as INTERNAL without its message', async () => {
    const a = await app();
    const r = await a.inject('/bug');
    expect(r.statusCode).toBe(500);
    expect(r.json()).toMatchObject({ code: 'INTERNAL', detail: 'internal error; see the gateway log' });
    expect(r.body).not.toContain('secret internals');
    await a.close();
  });
});
