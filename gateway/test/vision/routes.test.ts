import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mintVisionToken } from '@voxgate/protocol';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EventBus, type GatewayEvent } from '../../src/events/bus.js';
import { createMetrics } from '../../src/metrics.js';
import { VisionSlice, type VisionConfig } from '../../src/vision/config.js';
import { NO_EXPLAINER_ANSWER } from '../../src/vision/explainer.js';
import { photoRoutes } from '../../src/vision/photo-routes.js';
import { visionExplainRoute } from '../../src/vision/routes.js';
import { visionService } from '../../src/vision/start.js';
import { apiPart, bearer, listenLocal } from '../../../test/support/api-parts.js';
import { metricValue } from '../../../test/support/device-parts.js';
import { JPEG, upload } from '../../../test/support/vision-upload.js';

const VISION_KEY = 'vision-key-0123456789abcdef';

const token = (deviceId: string, inSeconds = 60) => mintVisionToken(VISION_KEY, deviceId, Date.now() / 1000 + inSeconds);

const dirs: string[] = [];
const apps: FastifyInstance[] = [];
afterEach(async () => {
  for (const a of apps.splice(0)) await a.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** The vision endpoint and the photo routes, as visionService builds them from the configuration (no gateway). */
async function visionPart(config: Partial<VisionConfig>) {
  const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-vision-'));
  dirs.push(dataDir);
  const metrics = createMetrics();
  const bus = new EventBus({ bufferSize: 100 });
  const events: GatewayEvent[] = [];
  bus.subscribe((e) => events.push(e));
  const logged: string[] = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => void logged.push(line) });
  const v = VisionSlice.parse({ serve: true, ...config });
  const service = visionService({ visionKey: VISION_KEY, dataDir, fallbackExplainer: undefined, bus, metrics, log }, v)!;
  // Devices authenticate with their vision token, outside the API keys (as buildApi mounts it).
  const app = await apiPart((scope) => scope.register(photoRoutes, { store: service.store }), { open: (a) => a.register(visionExplainRoute, service) });
  apps.push(app);
  const base = await listenLocal(app);
  const photos = async (deviceId: string) =>
    (await (await fetch(`${base}/v1/devices/${deviceId}/photos`, { headers: bearer() })).json()) as {
      photos: Array<{ id: string; question: string; bytes: number }>;
    };
  return { url: `${base}/mcp/vision/explain`, base, metrics, events, logged, photos };
}

describe('the vision endpoint (POST /mcp/vision/explain)', () => {
  it('keeps the photo, announces it, lists and serves it, and answers that no explainer is configured', async () => {
    const { url, base, events, photos } = await visionPart({ maxPhotoBytes: 4096 });
    const id = '02:00:00:00:09:80';
    const r = await upload(url, { deviceId: id, token: token(id), question: 'what is on the desk?' });
    expect(r).toEqual({ status: 200, body: { success: false, action: 'RESPONSE', response: NO_EXPLAINER_ANSWER } });
    const e = events.find((x) => x.type === 'device.photo')!;
    expect(e.data).toMatchObject({ bytes: JPEG.length, mimeType: 'image/jpeg', question: 'what is on the desk?' });
    const list = await photos(id);
    expect(list.photos).toHaveLength(1);
    expect(list.photos[0]).toMatchObject({ id: e.data['photoId'], question: 'what is on the desk?', bytes: JPEG.length });
    const img = await fetch(`${base}/v1/devices/${id}/photos/${list.photos[0]!.id}`, { headers: bearer() });
    expect(img.headers.get('content-type')).toBe('image/jpeg');
    expect(Buffer.from(await img.arrayBuffer()).equals(JPEG)).toBe(true);
    // The photos need an API key.
    expect((await fetch(`${base}/v1/devices/${id}/photos`)).status).toBe(401);
  });

  it('refuses a missing, foreign or expired token, a non-image, an oversized photo and a flood; keeps the newest photos per device', async () => {
    const { url, metrics, photos } = await visionPart({ maxPhotoBytes: 4096, photosPerDevice: 2, uploadsPerMinute: 5 });
    const id = '02:00:00:00:09:81';
    const t = token(id);
    expect((await upload(url, { deviceId: id })).status).toBe(401);
    expect((await upload(url, { deviceId: '02:00:00:00:09:82', token: t })).status).toBe(401);
    expect((await upload(url, { deviceId: id, token: token(id, -5) })).status).toBe(401);
    const notImage = await upload(url, { deviceId: id, token: t, file: Buffer.from('<html>hello</html>') });
    expect(notImage.status).toBe(400);
    expect(notImage.body).toMatchObject({ success: false });
    expect((await upload(url, { deviceId: id, token: t, file: Buffer.concat([JPEG, Buffer.alloc(8192)]) })).status).toBe(413);
    expect((await photos(id)).photos).toHaveLength(0);

    for (const q of ['one', 'two', 'three']) expect((await upload(url, { deviceId: id, token: t, question: q })).status).toBe(200);
    expect((await photos(id)).photos.map((p) => p.question)).toEqual(['three', 'two']);
    // Five uploads with a valid token so far (a burst of 5): the next is refused until the bucket refills.
    expect((await upload(url, { deviceId: id, token: t, question: 'four' })).status).toBe(429);
    expect(await metricValue(metrics, 'voxgate_vision_uploads_total', { outcome: 'unauthorized' })).toBe(3);
  });
});

describe('an external explainer (vision.explainerUrl)', () => {
  let explainer: Server;
  let seen: { auth?: string | undefined; deviceId?: string | undefined; body: string } | undefined;
  beforeAll(async () => {
    explainer = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen = { auth: req.headers.authorization, deviceId: req.headers['device-id'] as string | undefined, body: Buffer.concat(chunks).toString('latin1') };
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ success: true, action: 'RESPONSE', response: 'A red mug on a desk.' }));
      });
    });
    await new Promise<void>((resolve) => explainer.listen(0, '127.0.0.1', resolve));
  });
  afterAll(() => new Promise<void>((resolve) => explainer.close(() => resolve())));

  it("forwards the question and photo and passes on the explainer's answer", async () => {
    const port = (explainer.address() as { port: number }).port;
    const { url, logged } = await visionPart({ explainerUrl: `http://127.0.0.1:${port}/explain`, explainerToken: 'explainer-secret' });
    const id = '02:00:00:00:09:83';
    const r = await upload(url, { deviceId: id, token: token(id), question: 'what colour?' });
    expect(r).toEqual({ status: 200, body: { success: true, action: 'RESPONSE', response: 'A red mug on a desk.' } });
    expect(seen?.auth).toBe('Bearer explainer-secret');
    expect(seen?.deviceId).toBe(id);
    expect(seen?.body).toContain('what colour?');
    expect(logged.some((l) => l.includes('explainer-secret'))).toBe(false);
  });

  it('answers the device with an apology when the explainer cannot be reached, and keeps the photo', async () => {
    const { url, photos, metrics } = await visionPart({ explainerUrl: 'http://127.0.0.1:1/explain', explainerTimeoutMs: 5000 });
    const id = '02:00:00:00:09:84';
    const r = await upload(url, { deviceId: id, token: token(id) });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ success: false, action: 'RESPONSE' });
    expect((await photos(id)).photos).toHaveLength(1);
    expect(await metricValue(metrics, 'voxgate_vision_uploads_total', { outcome: 'explainer_failed' })).toBe(1);
  });
});

describe('uploads open at once (vision.maxConcurrentUploads, two per device)', () => {
  // An explainer that holds every request until released: each held request is an upload whose photo sits in memory.
  let explainer: Server;
  const held: Array<() => void> = [];
  let arrived: (() => void) | undefined;
  beforeAll(async () => {
    explainer = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        held.push(() => res.setHeader('content-type', 'application/json').end(JSON.stringify({ success: true, action: 'RESPONSE', response: 'held' })));
        arrived?.();
      });
    });
    await new Promise<void>((resolve) => explainer.listen(0, '127.0.0.1', resolve));
  });
  afterAll(() => new Promise<void>((resolve) => explainer.close(() => resolve())));
  const heldCount = (n: number) =>
    new Promise<void>((resolve) => {
      arrived = () => held.length >= n && resolve();
      arrived();
    });

  it('refuses a device past two open uploads (429) and anyone past the bound (503), and takes uploads again once answered; a cut-off or refused upload gives its slot back', async () => {
    const port = (explainer.address() as { port: number }).port;
    const { url, metrics } = await visionPart({ explainerUrl: `http://127.0.0.1:${port}/explain`, maxConcurrentUploads: 3 });
    // Uploads cut off mid-body and odd bodies first: each must give its slot back (three held below prove it).
    let n = 0xa0;
    const next = () => `02:00:00:00:09:${(n++).toString(16)}`;
    const visionPort = Number(new URL(url).port);
    for (let i = 0; i < 3; i++) {
      const id = next();
      // Headers and the first part, then the sender goes away.
      const s = connect(visionPort, '127.0.0.1');
      const body =
        '--b\r\ncontent-disposition: form-data; name="question"\r\n\r\nq\r\n--b\r\ncontent-disposition: form-data; name="file"; filename="a.jpg"\r\n\r\n\xff\xd8\xff';
      s.write(
        `POST /mcp/vision/explain HTTP/1.1\r\nhost: gw\r\ndevice-id: ${id}\r\nauthorization: Bearer ${token(id)}\r\n` +
          `content-type: multipart/form-data; boundary=b\r\ncontent-length: 100000\r\n\r\n${body}`,
        'latin1',
      );
      await new Promise<void>((resolve) => setImmediate(resolve));
      s.destroy();
      await new Promise<void>((resolve) => s.once('close', () => resolve()));
    }
    const post = async (body: string, id = next()) =>
      (
        await fetch(url, {
          method: 'POST',
          headers: { 'device-id': id, authorization: `Bearer ${token(id)}`, 'content-type': 'multipart/form-data; boundary=b' },
          body: Buffer.from(body, 'latin1'),
        })
      ).status;
    const field = (name: string, value: string) => `--b\r\ncontent-disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
    const file = (name: string) => `--b\r\ncontent-disposition: form-data; name="${name}"; filename="a.jpg"\r\n\r\n${JPEG.toString('latin1')}\r\n`;
    // Two files, seven parts, no closing boundary, no parts at all: refused as bodies, not as crashes.
    for (const body of [
      field('question', 'q') + file('file') + file('file2') + '--b--\r\n',
      field('a', '1').repeat(7) + file('file') + '--b--\r\n',
      field('question', 'q') + file('file'),
      '--b--\r\n',
    ])
      expect(await post(body)).toBe(400);
    expect(await metricValue(metrics, 'voxgate_vision_uploads_total', { outcome: 'bad_request' })).toBeGreaterThanOrEqual(4);
    const [a, b, c] = ['02:00:00:00:09:90', '02:00:00:00:09:91', '02:00:00:00:09:92'];
    const pending = [upload(url, { deviceId: a, token: token(a) }), upload(url, { deviceId: a, token: token(a) })];
    await heldCount(2);
    // Device a holds two uploads: its third is refused before its body is read; another device's goes through.
    const third = await upload(url, { deviceId: a, token: token(a) });
    expect(third.status).toBe(429);
    expect(third.body).toMatchObject({ success: false });
    pending.push(upload(url, { deviceId: b, token: token(b) }));
    await heldCount(3);
    // Three open in all: the gateway's bound.
    const full = await upload(url, { deviceId: c, token: token(c) });
    expect(full.status).toBe(503);
    expect(full.body).toMatchObject({ success: false });
    for (const release of held.splice(0)) release();
    for (const r of await Promise.all(pending)) expect(r.status).toBe(200);
    const again = upload(url, { deviceId: c, token: token(c) });
    await heldCount(1);
    held.splice(0)[0]!();
    expect((await again).status).toBe(200);
    expect(await metricValue(metrics, 'voxgate_vision_uploads_total', { outcome: 'device_busy' })).toBe(1);
    expect(await metricValue(metrics, 'voxgate_vision_uploads_total', { outcome: 'full' })).toBeGreaterThanOrEqual(1);
  });
});
