import type { ModelGate } from '../throttle/model-gates.js';

/** What the vision endpoint answers the device: the xiaozhi-server shape, whose `response` is spoken. */
export interface ExplainAnswer {
  success: boolean;
  action?: 'RESPONSE';
  response: string;
}

export interface ExplainInput {
  deviceId: string;
  question: string;
  image: Buffer;
  mimeType: string;
  /** Aborts when the device's request is gone (it disconnected): a waiting request leaves the queue. */
  signal?: AbortSignal | undefined;
}

/** Describes a photo. The assistant adds a vision model; until then, none or an external service. */
export interface VisionExplainer {
  explain(input: ExplainInput): Promise<ExplainAnswer>;
}

export const NO_EXPLAINER_ANSWER = 'The photo was received and saved, but no vision explainer is configured on the gateway, so it cannot be described.';

/** No explainer configured: a clear answer the device speaks; the photo is still kept. */
export const noExplainer: VisionExplainer = {
  explain: async () => ({ success: false, action: 'RESPONSE', response: NO_EXPLAINER_ANSWER }),
};

const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * An external explainer that speaks the xiaozhi vision protocol (e.g. xiaozhi-server's
 * `/mcp/vision/explain`): the photo and question are posted to it as multipart, its
 * `{success, response}` is passed on. It throws on failure; the route turns that into a spoken apology.
 */
export function httpExplainer(url: string, opts: { token?: string | undefined; timeoutMs: number }): VisionExplainer {
  return {
    async explain(input) {
      const form = new FormData();
      form.append('question', input.question);
      form.append('file', new Blob([new Uint8Array(input.image)], { type: input.mimeType }), 'camera.jpg');
      const headers: Record<string, string> = { 'device-id': input.deviceId };
      if (opts.token) headers['authorization'] = `Bearer ${opts.token}`;
      const res = await fetch(url, { method: 'POST', body: form, headers, signal: withCaller(AbortSignal.timeout(opts.timeoutMs), input.signal) });
      const text = (await res.text()).slice(0, MAX_ANSWER_BYTES);
      let body: { success?: unknown; response?: unknown } = {};
      try {
        body = JSON.parse(text) as typeof body;
      } catch {
        // not JSON: reported below
      }
      if (!res.ok || typeof body.response !== 'string') throw new Error(`explainer answered HTTP ${res.status} without a text response`);
      return { success: body.success !== false, action: 'RESPONSE', response: body.response };
    },
  };
}

const withCaller = (timeout: AbortSignal, caller: AbortSignal | undefined): AbortSignal => (caller ? AbortSignal.any([timeout, caller]) : timeout);

/**
 * `explainer` behind the gateway-wide bound on vision requests (modelRequests.vision): each photo waits for a slot,
 * fairly between tenants (`shareOf` the device), and frees it however the explainer ends. A refusal rejects with
 * MODEL_BUSY (the route answers 503 with Retry-After).
 */
export function gatedExplainer(explainer: VisionExplainer, gate: Pick<ModelGate, 'run'>, shareOf: (deviceId: string) => string | undefined): VisionExplainer {
  return { explain: (input) => gate.run(shareOf(input.deviceId), input.signal, () => explainer.explain(input)) };
}
