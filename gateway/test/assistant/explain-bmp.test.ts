import { PNG } from 'pngjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Assistant } from '../../src/assistant/assistant.js';
import { assistantExplainer } from '../../src/assistant/vision.js';
import { ConfigSchema } from '../../src/config.js';
import type { McpHub } from '../../src/hub/hub.js';
import { createLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics.js';
import { llmModels } from '../../../test/support/assistant.js';
import { startLlmServer, type LlmServer } from '../../../test/support/llm-server.js';
import { bmp24 } from '../vision/bmp-fixture.js';

/**
 * Deliberate change (issue 18): the vision endpoint has always accepted BMP photos, and now the assistant's
 * explainer describes them too (it used to refuse them, so the device heard an apology). No provider takes
 * BMP, so the model is sent the same pixels as a PNG. The photo limit is the endpoint's, vision.maxPhotoBytes.
 */
describe('the assistant explains BMP photos', () => {
  let llm: LlmServer;
  beforeAll(async () => {
    llm = await startLlmServer();
  });
  afterAll(async () => {
    await llm.close();
  });

  // explainImage never touches the hub: the explainer is built without a whole gateway.
  const noHub = {} as McpHub;
  const assistantWith = (visionModel: string) =>
    new Assistant({
      config: ConfigSchema.parse({ assistant: { models: llmModels(llm), visionModel } }).assistant,
      hub: noHub,
      log: createLogger('silent'),
      metrics: createMetrics(),
    });
  const colour = (x: number, y: number): [number, number, number] => [x * 100, y * 100, 50];
  const photo = bmp24(2, 2, colour);

  it('sends the BMP to each provider as a PNG with the same pixels', async () => {
    for (const [model, api] of [
      ['oa', 'openai'],
      ['an', 'anthropic'],
      ['ge', 'gemini'],
    ] as const) {
      llm.script([{ text: `Four squares (${api}).` }]);
      llm.requests.length = 0;
      const a = assistantWith(model);
      const explainer = assistantExplainer(a, 5 * 1024 * 1024)!;
      const answer = await explainer.explain({ question: 'What colours?', image: photo });
      expect(answer).toEqual({ success: true, action: 'RESPONSE', response: `Four squares (${api}).` });
      a.close();
      const body = JSON.stringify(llm.requests[0]!.body);
      expect(body).not.toContain('image/bmp');
      const b64 = /(iVBORw0KGgo[A-Za-z0-9+/=]+)/.exec(body)?.[1];
      expect(b64, `${api}: a PNG in the request`).toBeDefined();
      const png = PNG.sync.read(Buffer.from(b64!, 'base64'));
      expect([png.width, png.height]).toEqual([2, 2]);
      expect([...png.data.subarray(4, 7)]).toEqual(colour(1, 0));
      expect([...png.data.subarray(8, 11)]).toEqual(colour(0, 1));
    }
  });

  it('refuses a photo over vision.maxPhotoBytes, and a malformed BMP, before asking the model', async () => {
    const a = assistantWith('oa');
    llm.requests.length = 0;
    await expect(a.explainImage('x', photo, photo.length - 1)).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
    await expect(a.explainImage('x', photo.subarray(0, 30), photo.length)).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
    expect(llm.requests).toHaveLength(0);
    a.close();
  });
});
