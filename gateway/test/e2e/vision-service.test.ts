import { mintVisionToken } from '@voxgate/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { llmModels } from '../../../test/support/assistant.js';
import { startLlmServer } from '../../../test/support/llm-server.js';
import { NO_EXPLAINER_ANSWER } from '../../src/vision/explainer.js';
import { JPEG, upload } from '../../../test/support/vision-upload.js';

// Tokens, limits, the photo store and an external explainer are the route's own (test/vision/); here, a device's
// own upload through its camera tool, and the assistant's model as the explainer.
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
