import { mintVisionToken } from '@voxgate/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { llmModels } from '../../../test/support/assistant.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startLlmServer, type LlmServer, type RecordedRequest } from '../../../test/support/llm-server.js';
import { JPEG } from '../../../test/support/vision-upload.js';
import { deferred, until, type Deferred } from '../../../test/support/wait.js';

/**
 * modelRequests.vision: photos posted to the vision endpoint, explained by the assistant's vision model on the
 * OpenAI-compatible stand-in (which counts the requests it holds open). One explanation at a time, one waiting.
 */
describe('modelRequests.vision: the vision endpoint behind a gateway-wide bound', () => {
  let llm: LlmServer;
  let t: TestGateway;
  const holds = new Map<string, Deferred<void>>();
  const question = (r: RecordedRequest) => /question (\d+)/.exec(JSON.stringify(r.body))?.[0];

  beforeAll(async () => {
    llm = await startLlmServer((req) => ({ text: `Described ${question(req)}.`, hold: holds.get(question(req) ?? '')?.promise }));
    t = await startTestGateway({
      vision: { url: 'http://127.0.0.1:1/mcp/vision/explain', uploadsPerMinute: 100 },
      assistant: { models: llmModels(llm), visionModel: 'oa' },
      modelRequests: { vision: { maxConcurrent: 1, maxWaiting: 1, maxWaitMs: 60_000 } },
    });
  });
  afterAll(async () => {
    for (const h of holds.values()) h.resolve();
    await t?.close();
    await llm?.close();
  });

  let mac = 0x10;
  const post = (q: string, signal?: AbortSignal) => {
    const deviceId = `02:00:00:00:0e:${(mac++).toString(16).padStart(2, '0')}`;
    const form = new FormData();
    form.append('question', q);
    form.append('file', new Blob([new Uint8Array(JPEG)], { type: 'image/jpeg' }), 'camera.jpg');
    const headers = { 'device-id': deviceId, authorization: `Bearer ${mintVisionToken(t.gw.visionKey, deviceId, Date.now() / 1000 + 60)}` };
    return fetch(`${t.baseUrl}/mcp/vision/explain`, { method: 'POST', headers, body: form, ...(signal ? { signal } : {}) });
  };
  const waiting = (n: number) => until(async () => (await t.metric('voxgate_model_requests_waiting', { kind: 'vision' })) === n, `${n} photos waiting`);

  it('one photo at the model at a time; past the queue a 503 with Retry-After; a device that hangs up never reaches the model', async () => {
    holds.set('question 1', deferred());
    const first = post('question 1');
    await until(() => llm.requests.length === 1, 'the first photo at the model');
    const ac = new AbortController();
    const gone = post('question 2', ac.signal).catch((e: unknown) => e);
    await waiting(1);
    // The queue (one place) is full: refused at once, the standard way.
    const refused = await post('question 3');
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('60');
    expect(refused.headers.get('content-type')).toContain('application/problem+json');
    expect(await refused.json()).toMatchObject({ code: 'MODEL_BUSY', kind: 'vision', reason: 'queue_full' });
    // The waiting device hangs up: it leaves the queue, and another takes its place.
    ac.abort();
    await gone;
    await waiting(0);
    const next = post('question 4');
    await waiting(1);
    holds.get('question 1')!.resolve();
    expect(await (await first).json()).toEqual({ success: true, action: 'RESPONSE', response: 'Described question 1.' });
    expect(await (await next).json()).toEqual({ success: true, action: 'RESPONSE', response: 'Described question 4.' });
    expect(llm.requests.map(question)).toEqual(['question 1', 'question 4']);
    expect(llm.peakOpen()).toBe(1);
    expect(await t.metric('voxgate_vision_uploads_total', { outcome: 'busy' })).toBe(1);
  });
});
