import { createHash } from 'node:crypto';
import { connect } from 'node:net';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { OtaConfig } from '../../src/firmware/config.js';
import { firmwareOfferRoute } from '../../src/firmware/offer-route.js';
import { rolloutBucket } from '../../src/firmware/rollout.js';
import { firmwareRoutes } from '../../src/firmware/routes.js';
import { FirmwareService } from '../../src/firmware/service.js';
import { createMetrics } from '../../src/metrics.js';
import { apiPart, bearer, listenLocal } from '../../../test/support/api-parts.js';
import { metricValue } from '../../../test/support/device-parts.js';

const mac = (i: number) =>
  `02:00:00:${((i >> 16) & 0xff).toString(16).padStart(2, '0')}:${((i >> 8) & 0xff).toString(16).padStart(2, '0')}:${(i & 0xff).toString(16).padStart(2, '0')}`;
const FLEET = Array.from({ length: 4000 }, (_, i) => mac(i));
const IMAGE = Buffer.from(Array.from({ length: 300_000 }, (_, i) => (i * 7919) & 0xff));
const IMAGE_SHA = createHash('sha256').update(IMAGE).digest('hex');

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** GET /firmware/{file} and GET /v1/devices/{id}/firmware over a firmware service on a temp data dir (no gateway). */
async function firmwarePart(images: Record<string, Buffer>, settings: Partial<OtaConfig> = {}, limits = { maxPerAddress: 2, maxTotal: 10 }) {
  const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-fw-'));
  cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }));
  const dir = join(dataDir, 'firmware');
  mkdirSync(dir);
  for (const [name, bytes] of Object.entries(images)) writeFileSync(join(dir, name), bytes);
  const metrics = createMetrics();
  const logged: Array<Record<string, unknown>> = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => void logged.push(JSON.parse(line) as Record<string, unknown>) });
  const firmware = new FirmwareService({ settings: { firmwareVersion: '0.0.0', firmwareUrl: '', ...settings }, imagesDir: dir, log, metrics });
  const app: FastifyInstance = await apiPart((scope) => scope.register(firmwareOfferRoute, { firmware, http: { port: 8000 } }), {
    // Devices download without a key (as buildApi mounts it); device ids and file names up to 256 characters.
    open: (a) => a.register(firmwareRoutes, { firmware, ...limits }),
    // X-Forwarded-For believed from anyone: the tests name IPv6 sources from 127.0.0.1.
    fastify: { routerOptions: { maxParamLength: 256 }, loggerInstance: log, trustProxy: true },
  });
  cleanup.push(() => app.close());
  return { app, dir, firmware, metrics, logged };
}

describe('GET /firmware/{file}', () => {
  it('serves an image with its length and digest, and nothing outside the directory', async () => {
    const { app, dir, metrics } = await firmwarePart({ 'devkit-1.1.0.bin': IMAGE });
    writeFileSync(join(dir, '..', 'outside.bin'), 'secret');
    const res = await app.inject('/firmware/devkit-1.1.0.bin');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-length']).toBe(String(IMAGE.length));
    expect(res.headers['repr-digest']).toBe(`sha-256=:${Buffer.from(IMAGE_SHA, 'hex').toString('base64')}:`);
    expect(res.rawPayload.equals(IMAGE)).toBe(true);
    const head = await app.inject({ method: 'HEAD', url: '/firmware/devkit-1.1.0.bin' });
    expect([head.statusCode, head.headers['content-length']]).toEqual([200, String(IMAGE.length)]);

    for (const path of ['..%2Foutside.bin', '%2E%2E%2Foutside.bin', '.hidden', 'a%5Cb.bin', 'x'.repeat(200)]) {
      const r = await app.inject(`/firmware/${path}`);
      expect([r.statusCode, path]).toEqual([400, path]);
      expect(r.headers['content-type']).toContain('application/problem+json');
      expect(r.json<{ code: string }>().code).toBe('INVALID_REQUEST');
    }
    mkdirSync(join(dir, 'subdir'));
    for (const name of ['missing.bin', 'subdir']) {
      const r = await app.inject(`/firmware/${name}`);
      expect(r.statusCode).toBe(404);
      expect(r.json<{ code: string }>().code).toBe('NOT_FOUND');
    }
    expect(await metricValue(metrics, 'voxgate_firmware_downloads_total', { outcome: 'served' })).toBe(1);
    expect(await metricValue(metrics, 'voxgate_firmware_downloads_total', { outcome: 'bad_name' })).toBeGreaterThanOrEqual(1);
  });

  it('refuses a download past the bound per address (429), and takes one again when a download ends', async () => {
    const { app, metrics, logged } = await firmwarePart({ 'a.bin': IMAGE }, {}, { maxPerAddress: 0, maxTotal: 10 });
    const since = performance.now();
    for (let i = 0; i < 40; i++) {
      const r = await app.inject('/firmware/a.bin');
      expect([r.statusCode, r.json<{ code: string }>().code]).toEqual([429, 'RATE_LIMITED']);
    }
    expect(await metricValue(metrics, 'voxgate_firmware_downloads_total', { outcome: 'busy' })).toBe(40);
    // Counted, not logged line for line (no key is asked for a download): 10 lines per 10 s window.
    const lines = logged.filter((l) => l['msg'] === 'firmware download refused: too many at once').length;
    expect(lines).toBeGreaterThanOrEqual(10);
    expect(lines).toBeLessThanOrEqual(10 * (1 + Math.floor((performance.now() - since) / 10_000)));
    const roomy = await firmwarePart({ 'a.bin': IMAGE }, {}, { maxPerAddress: 1, maxTotal: 1 });
    // One at a time, each released when it is done: many in a row all pass.
    for (let i = 0; i < 3; i++) expect((await roomy.app.inject('/firmware/a.bin')).statusCode).toBe(200);
  });
});

describe('GET /firmware/{file} from IPv6', () => {
  it('counts the downloads of an IPv6 /64 together: another address in it is no fresh share of the slots', async () => {
    const big = Buffer.alloc(32 * 1024 * 1024, 1);
    const { app } = await firmwarePart({ 'big.bin': big }, {}, { maxPerAddress: 1, maxTotal: 10 });
    const base = await listenLocal(app);
    // A download held open: the client reads its head and then nothing (32 MiB do not fit the socket buffers).
    const held = connect(Number(new URL(base).port), '127.0.0.1');
    cleanup.push(() => held.destroy());
    held.write('GET /firmware/big.bin HTTP/1.1\r\nhost: gw\r\nx-forwarded-for: 2001:db8:1:2::1\r\n\r\n');
    const head = await new Promise<string>((resolve) => held.once('data', (c: Buffer) => resolve(c.toString('latin1'))));
    held.pause();
    expect(head).toMatch(/^HTTP\/1.1 200/);
    const from = async (ip: string) => (await app.inject({ url: '/firmware/big.bin', headers: { 'x-forwarded-for': ip } })).statusCode;
    expect(await from('2001:db8:1:2::2')).toBe(429);
    expect(await from('2001:db8:1:3::1')).toBe(200);
  });
});

describe('GET /v1/devices/{id}/firmware', () => {
  const ota = { firmwareVersion: '1.0.5', firmwareUrl: 'https://fw.example.com/1.0.5.bin' };

  it('says what the next OTA check would offer and why, without counting or remembering anything', async () => {
    const inside = FLEET.find((id) => rolloutBucket(id) < 30)!;
    const listed = FLEET.find((id) => rolloutBucket(id) >= 30)!;
    const { app, firmware, metrics } = await firmwarePart(
      { 'devkit-1.1.0.bin': IMAGE },
      { ...ota, rollout: [{ version: '1.1.0', url: 'devkit-1.1.0.bin', percent: 30, devices: [listed], boards: ['voxgate-devkit'] }] },
    );
    const preview = async (id: string, headers: Record<string, string> = bearer()) => {
      const r = await app.inject({ method: 'GET', url: `/v1/devices/${id}/firmware`, headers: { host: 'gw.local:8000', ...headers } });
      return { status: r.statusCode, body: r.json<Record<string, unknown>>() };
    };
    const base = new URL('http://gw.local:8000');
    // Never checked in: its board is unknown, so a board-limited rollout does not cover it yet.
    expect((await preview(inside)).body).toEqual({
      deviceId: inside,
      reported: null,
      source: 'baseline',
      offer: { version: '1.0.5', url: 'https://fw.example.com/1.0.5.bin' },
      rollout: null,
    });
    // The device's OTA check, as the OTA route hands it to the service (a check that counts as the device's own).
    const check = {
      deviceId: inside,
      userAgent: 'voxgate-devkit/1.0.0',
      body: { application: { version: '1.0.0' }, board: { type: 'voxgate-devkit', name: 'not-in-any-rollout' } },
    };
    const offered = await firmware.offerFor({ ...check, base });
    firmware.rememberReport(check);
    const after = await preview(inside.replaceAll(':', '_').toUpperCase());
    expect(after.status).toBe(200);
    expect(after.body).toEqual({
      deviceId: inside,
      reported: { version: '1.0.0', boards: ['voxgate-devkit'] },
      source: 'rollout',
      offer: offered,
      rollout: { version: '1.1.0', percent: 30, listed: false, bucket: rolloutBucket(inside) },
    });
    await firmware.offerFor({ deviceId: listed, userAgent: 'voxgate-devkit/1.0.0', body: {}, base });
    firmware.rememberReport({ deviceId: listed, userAgent: 'voxgate-devkit/1.0.0', body: {} });
    expect((await preview(listed)).body['rollout']).toEqual({ version: '1.1.0', percent: 30, listed: true, bucket: rolloutBucket(listed) });
    // Only the two OTA checks were counted; the previews were not.
    const offers = (await metrics.registry.getSingleMetric('voxgate_firmware_offers_total')!.get()).values.reduce((n, v) => n + v.value, 0);
    expect(offers).toBe(2);

    expect((await preview('not-a-mac')).body['code']).toBe('INVALID_REQUEST');
    expect((await preview(inside, {})).status).toBe(401);
  });

  it('answers none, and logs nothing, when the configured image is missing', async () => {
    const { app, logged } = await firmwarePart({}, { rollout: [{ version: '1.1.0', url: 'missing-1.1.0.bin', percent: 100 }] });
    const r = await app.inject({ method: 'GET', url: `/v1/devices/${FLEET[5]!}/firmware`, headers: bearer() });
    expect(r.json()).toMatchObject({ source: 'none', offer: { version: '0.0.0', url: '' }, rollout: null });
    expect(logged.some((l) => l['msg'] === 'firmware image missing: not offered')).toBe(false);
  });
});
