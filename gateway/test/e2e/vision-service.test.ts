import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mintVisionToken } from '@voxgate/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { llmModels } from '../../../test/support/assistant.js';
import { startLlmServer } from '../../../test/support/llm-server.js';
import { NO_EXPLAINER_ANSWER } from '../../src/vision/explainer.js';
import { PhotoStore } from '../../src/vision/photo-store.js';

// The smallest thing that starts like a JPEG (SOI + APP0 marker) and some bytes.
const JPEG = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(600, 7), Buffer.from([0xff, 0xd9])]);

/** A device's upload, as the firmware sends it (question first, then the file). */
async function upload(
  url: string,
  opts: { deviceId: string; token?: string; file?: Buffer; question?: string },
): Promise<{ status: number; body: Record<string, unknown> }> {
  const form = new FormData();
  form.append('question', opts.question ?? 'what is it?');
  form.append('file', new Blob([new Uint8Array(opts.file ?? JPEG)], { type: 'image/jpeg' }), 'camera.jpg');
  const headers: Record<string, string> = { 'device-id': opts.deviceId };
  if (opts.token) headers['authorization'] = `Bearer ${opts.token}`;
  const res = await fetch(url, { method: 'POST', headers, body: form });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('the vision endpoint (POST /mcp/vision/explain)', () => {
  let t: TestGateway;
  let url: string;
  beforeAll(async () => {
    // The port is only known after start; devices get the URL's token, the test points them at the real port.
    t = await startTestGateway({ vision: { url: 'http://127.0.0.1:1/mcp/vision/explain', maxPhotoBytes: 4096, photosPerDevice: 2, uploadsPerMinute: 5 } });
    url = `${t.baseUrl}/mcp/vision/explain`;
  });
  afterAll(() => t.close());

  it("takes the firmware's photo upload, keeps it, announces it, and answers that no explainer is configured", async () => {
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:09:80', cameraJpeg: JPEG });
    try {
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(t.wsUrl);
      await ready;
      d.vision = { url, token: d.vision!.token! };
      const photoEvent = t.nextEvent('device.photo', d.deviceId);
      const r = await t.api<{ content: Array<{ text: string }> }>('POST', `/v1/devices/${d.deviceId}/tools/self.camera.take_photo/call`, {
        arguments: { question: 'what is on the desk?' },
      });
      expect(r.status).toBe(200);
      expect(JSON.parse(r.body.content[0]!.text)).toEqual({ success: false, action: 'RESPONSE', response: NO_EXPLAINER_ANSWER });
      const e = await photoEvent;
      expect(e.data).toMatchObject({ bytes: JPEG.length, mimeType: 'image/jpeg', question: 'what is on the desk?' });

      const list = await t.api<{ photos: Array<{ id: string; question: string; bytes: number }> }>('GET', `/v1/devices/${d.deviceId}/photos`);
      expect(list.body.photos).toHaveLength(1);
      expect(list.body.photos[0]).toMatchObject({ id: e.data['photoId'], question: 'what is on the desk?', bytes: JPEG.length });
      const img = await fetch(`${t.baseUrl}/v1/devices/${d.deviceId}/photos/${list.body.photos[0]!.id}`, {
        headers: { authorization: 'Bearer test-api-key-0123456789' },
      });
      expect(img.headers.get('content-type')).toBe('image/jpeg');
      expect(Buffer.from(await img.arrayBuffer()).equals(JPEG)).toBe(true);
    } finally {
      d.terminate();
    }
  });

  it('refuses a missing, foreign or expired token, a non-image, an oversized photo and a flood; keeps the newest photos per device', async () => {
    const id = '02:00:00:00:09:81';
    const token = mintVisionToken(t.gw.visionKey, id, Date.now() / 1000 + 60);
    expect((await upload(url, { deviceId: id })).status).toBe(401);
    expect((await upload(url, { deviceId: '02:00:00:00:09:82', token })).status).toBe(401);
    expect((await upload(url, { deviceId: id, token: mintVisionToken(t.gw.visionKey, id, Date.now() / 1000 - 5) })).status).toBe(401);
    const notImage = await upload(url, { deviceId: id, token, file: Buffer.from('<html>hello</html>') });
    expect(notImage.status).toBe(400);
    expect(notImage.body).toMatchObject({ success: false });
    expect((await upload(url, { deviceId: id, token, file: Buffer.concat([JPEG, Buffer.alloc(8192)]) })).status).toBe(413);
    expect((await t.api<{ photos: unknown[] }>('GET', `/v1/devices/${id}/photos`)).body.photos).toHaveLength(0);

    for (const q of ['one', 'two', 'three']) expect((await upload(url, { deviceId: id, token, question: q })).status).toBe(200);
    const list = await t.api<{ photos: Array<{ question: string }> }>('GET', `/v1/devices/${id}/photos`);
    expect(list.body.photos.map((p) => p.question)).toEqual(['three', 'two']);
    // Five uploads with a valid token so far (a burst of 5): the next is refused until the bucket refills.
    expect((await upload(url, { deviceId: id, token, question: 'four' })).status).toBe(429);
    expect(await t.metric('voxgate_vision_uploads_total', { outcome: 'unauthorized' })).toBe(3);
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
    const t = await startTestGateway({
      vision: { url: 'http://127.0.0.1:1/mcp/vision/explain', explainerUrl: `http://127.0.0.1:${port}/explain`, explainerToken: 'explainer-secret' },
    });
    try {
      const id = '02:00:00:00:09:83';
      const r = await upload(`${t.baseUrl}/mcp/vision/explain`, {
        deviceId: id,
        token: mintVisionToken(t.gw.visionKey, id, Date.now() / 1000 + 60),
        question: 'what colour?',
      });
      expect(r).toEqual({ status: 200, body: { success: true, action: 'RESPONSE', response: 'A red mug on a desk.' } });
      expect(seen?.auth).toBe('Bearer explainer-secret');
      expect(seen?.deviceId).toBe(id);
      expect(seen?.body).toContain('what colour?');
      expect(t.logs.some((l) => JSON.stringify(l).includes('explainer-secret'))).toBe(false);
    } finally {
      await t.close();
    }
  });
});

describe("the assistant's vision model as the explainer", () => {
  it('answers the device from a vision-capable assistant model when no external explainer is set', async () => {
    const llm = await startLlmServer();
    const t = await startTestGateway({ vision: { url: 'http://127.0.0.1:1/mcp/vision/explain' }, assistant: { models: llmModels(llm), visionModel: 'oa' } });
    try {
      llm.script([{ text: 'A blue cup.' }]);
      const id = '02:00:00:00:09:84';
      const r = await upload(`${t.baseUrl}/mcp/vision/explain`, {
        deviceId: id,
        token: mintVisionToken(t.gw.visionKey, id, Date.now() / 1000 + 60),
        question: 'what is this?',
      });
      expect(r).toEqual({ status: 200, body: { success: true, action: 'RESPONSE', response: 'A blue cup.' } });
      expect(JSON.stringify(llm.requests[0]!.body)).toContain('what is this?');
    } finally {
      await t.close();
      await llm.close();
    }
  });
});

describe('PhotoStore', () => {
  it('keeps at most perDevice per device and total in all, across a restart', () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-photos-'));
    try {
      const a = new PhotoStore(dir, { perDevice: 2, total: 3 });
      for (const q of ['a1', 'a2', 'a3']) a.save('02:00:00:00:00:0a', JPEG, { mimeType: 'image/jpeg', question: q });
      for (const q of ['b1', 'b2']) a.save('02:00:00:00:00:0b', JPEG, { mimeType: 'image/jpeg', question: q });
      expect(a.list('02:00:00:00:00:0a').map((p) => p.question)).toEqual(['a3']);
      expect(a.list('02:00:00:00:00:0b').map((p) => p.question)).toEqual(['b2', 'b1']);
      const b = new PhotoStore(dir, { perDevice: 1, total: 3 });
      expect(b.list('02:00:00:00:00:0b').map((p) => p.question)).toEqual(['b2']);
      expect(b.read('02:00:00:00:00:0a', a.list('02:00:00:00:00:0a')[0]!.id)?.data.equals(JPEG)).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
