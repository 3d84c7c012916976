import Fastify, { type FastifyInstance } from 'fastify';
import { describe, expect, it } from 'vitest';
import { registerProblemHandlers } from '../../src/api/problem.js';
import { parseDeviceId, problems, publicBase } from '../../src/api/route-helpers.js';
import { GatewayError } from '../../src/errors.js';

describe('parseDeviceId', () => {
  it('takes a MAC with colons, underscores, dashes or no separators, as lowercase colons', () => {
    for (const raw of ['AA:BB:CC:DD:EE:FF', 'aa_bb_cc_dd_ee_ff', 'aa-bb-cc-dd-ee-ff', 'aabbccddeeff'])
      expect([raw, parseDeviceId(raw)]).toEqual([raw, 'aa:bb:cc:dd:ee:ff']);
  });

  it('refuses anything else with INVALID_REQUEST, quoting at most 64 characters of it', () => {
    for (const raw of ['', 'aa:bb:cc:dd:ee', 'zz:bb:cc:dd:ee:ff', 'aa:bb:cc:dd:ee:ff:00', '../etc/passwd']) {
      const e = (() => {
        try {
          parseDeviceId(raw);
        } catch (err) {
          return err;
        }
        return undefined;
      })();
      expect(e).toBeInstanceOf(GatewayError);
      expect((e as GatewayError).code).toBe('INVALID_REQUEST');
    }
    expect(() => parseDeviceId('x'.repeat(1000))).toThrow(new RegExp(`"${'x'.repeat(64)}" is not a device id`));
  });
});

describe('problems', () => {
  it('describes each status as a problem+json document', () => {
    const p = problems(400, 404);
    expect(Object.keys(p)).toEqual(['400', '404']);
    expect(p[404]).toMatchObject({ description: 'problem+json', type: 'object' });
  });
});

describe('publicBase', () => {
  /** A route that answers the base URL devices would be told, behind the given proxies. */
  async function app(http: { publicUrl?: string; port: number }, trustProxy: string[] | false = false): Promise<FastifyInstance> {
    const a = Fastify({ trustProxy });
    registerProblemHandlers(a);
    a.get('/base', async (req) => ({ base: publicBase(req, http).href }));
    await a.ready();
    return a;
  }
  const base = async (a: FastifyInstance, headers: Record<string, string>) => {
    const r = await a.inject({ method: 'GET', url: '/base', headers });
    return r.statusCode === 200 ? r.json<{ base: string }>().base : r.json<{ code: string }>().code;
  };

  it('prefers the configured public URL over any header', async () => {
    const a = await app({ publicUrl: 'https://gw.example.com:8443', port: 8000 });
    expect(await base(a, { host: 'evil.example' })).toBe('https://gw.example.com:8443/');
    await a.close();
  });

  it('uses the Host header, and refuses one that is not a plain host[:port]', async () => {
    const a = await app({ port: 8000 });
    expect(await base(a, { host: 'gateway.local:8000' })).toBe('http://gateway.local:8000/');
    expect(await base(a, { host: '192.168.1.5' })).toBe('http://192.168.1.5/');
    expect(await base(a, { host: '[::1]:8000' })).toBe('http://[::1]:8000/');
    for (const host of ['evil.example/path', 'user@evil.example', 'a b', 'gateway:99999'])
      expect([host, await base(a, { host })]).toEqual([host, 'INVALID_REQUEST']);
    await a.close();
  });

  it('believes X-Forwarded-Proto and -Host from a trusted proxy only', async () => {
    const untrusting = await app({ port: 8000 });
    const forwarded = { host: 'internal:8000', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'gw.example.com' };
    expect(await base(untrusting, forwarded)).toBe('http://internal:8000/');
    const trusting = await app({ port: 8000 }, ['127.0.0.1']);
    expect(await base(trusting, forwarded)).toBe('https://gw.example.com/');
    await untrusting.close();
    await trusting.close();
  });
});
