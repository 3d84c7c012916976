import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Assistant } from '../../src/assistant/assistant.js';
import { assistantExplainer } from '../../src/assistant/vision.js';
import { ConfigSchema } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics.js';
import { imageType } from '../../src/vision/image-type.js';
import { llmModels } from '../../../test/support/assistant.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startLlmServer, type LlmServer } from '../../../test/support/llm-server.js';

/** A vision-capable model answers questions about a device's photo, in the xiaozhi vision server's shape. */
/** vision.maxPhotoBytes's default. */
const LIMIT = 5 * 1024 * 1024;
const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.from('fake png body')]);

describe('vision', () => {
  let llm: LlmServer;
  let t: TestGateway;
  beforeAll(async () => {
    llm = await startLlmServer();
    t = await startTestGateway();
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });

  const assistantWith = (visionModel: string, extra: Record<string, unknown> = {}) =>
    new Assistant({
      config: ConfigSchema.parse({ assistant: { models: llmModels(llm), visionModel, ...extra } }).assistant,
      hub: t.gw.hub,
      log: createLogger('silent'),
      metrics: createMetrics(),
    });

  it('sends the photo to OpenAI, Anthropic and Gemini models and answers {success, action, response}', async () => {
    const b64 = PNG.toString('base64');
    for (const [model, api] of [
      ['oa', 'openai'],
      ['an', 'anthropic'],
      ['ge', 'gemini'],
    ] as const) {
      llm.script([{ text: `A red mug (${api}).` }]);
      llm.requests.length = 0;
      const a = assistantWith(model);
      expect(await a.explainImage('What is on the desk?', PNG, LIMIT)).toEqual({ success: true, action: 'RESPONSE', response: `A red mug (${api}).` });
      a.close();
      const req = llm.requests[0]!;
      expect(req.api).toBe(api);
      const body = JSON.stringify(req.body);
      expect(body).toContain(b64);
      expect(body).toContain('What is on the desk?');
      if (api === 'openai') expect(body).toContain(`data:image/png;base64,${b64}`);
      if (api === 'anthropic') expect(body).toContain('"media_type":"image/png"');
      if (api === 'gemini') expect(body).toContain('"mimeType":"image/png"');
    }
  });

  it('refuses what is not an image, and says when no vision model is configured', async () => {
    const a = assistantWith('oa');
    await expect(a.explainImage('x', Buffer.from('<svg/>'), LIMIT)).rejects.toMatchObject({ code: 'INVALID_REQUEST' });
    a.close();
    await expect(t.gw.assistant.explainImage('x', PNG, LIMIT)).rejects.toMatchObject({ code: 'MODEL_NOT_FOUND' });
    expect(assistantExplainer(t.gw.assistant, LIMIT)).toBeUndefined();
    const seeing = assistantWith('oa');
    llm.script([{ text: 'A cat.' }]);
    expect(await assistantExplainer(seeing, LIMIT)!.explain({ question: 'what?', image: PNG })).toEqual({
      success: true,
      action: 'RESPONSE',
      response: 'A cat.',
    });
    seeing.close();
    llm.script([{ hang: true }]);
    const slow = assistantWith('an', { modelTimeoutMs: 200 });
    await expect(slow.explainImage('x', PNG, LIMIT)).rejects.toMatchObject({ code: 'MODEL_TIMEOUT' });
    slow.close();
    llm.script([{ status: 400, error: 'image too small' }]);
    const failing = assistantWith('ge');
    await expect(failing.explainImage('x', PNG, LIMIT)).rejects.toMatchObject({ code: 'MODEL_ERROR', message: expect.stringContaining('image too small') });
    failing.close();
    expect(imageType(Buffer.from([0xff, 0xd8, 0xff, 0xe0]))).toBe('image/jpeg');
    expect(imageType(Buffer.from('GIF89a....'))).toBe('image/gif');
    expect(imageType(Buffer.from('RIFF0000WEBPVP8 '))).toBe('image/webp');
  });
});
