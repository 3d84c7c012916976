import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { llmModels } from '../../../test/support/assistant.js';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startLlmServer, type LlmServer, type RecordedRequest } from '../../../test/support/llm-server.js';
import { deferred, until, type Deferred } from '../../../test/support/wait.js';

/**
 * modelRequests.llm: a gateway-wide bound on assistant model requests in flight, through a whole gateway and the
 * OpenAI-compatible stand-in (which counts the requests it holds open at once). Each model request is held by the
 * stand-in until the test releases its message, so who reaches the provider, and in which order, is observable.
 */

const ACME = 'acme-key-0123456789';
const GLOBEX = 'globex-key-0123456789';

/** The user message a recorded request carries (each test's messages are unique). */
const said = (r: RecordedRequest) => (r.body['messages'] as Array<{ role: string; content: string }>).filter((m) => m.role === 'user').at(-1)?.content;

type LlmLimits = { maxConcurrent: number; maxWaiting: number; maxWaitingPerTenant: number; maxWaitMs: number };

/**
 * The stand-in model, holding each request while `holds` has a promise for its message, and a gateway asking it under
 * the bound `limits`, with the keys of two tenants (ACME, GLOBEX) beside the operator's.
 */
async function startHeld(holds: ReadonlyMap<string, Deferred<void>>, limits: LlmLimits): Promise<{ llm: LlmServer; t: TestGateway }> {
  const llm = await startLlmServer((req) => ({ text: `answer to ${said(req)}`, hold: holds.get(said(req) ?? '')?.promise }));
  const { oa } = llmModels(llm);
  try {
    const t = await startTestGateway({
      apiKeys: [TEST_API_KEY, ACME, GLOBEX],
      apiKeyTenants: { [ACME]: 'acme', [GLOBEX]: 'globex' },
      assistant: { models: { oa }, defaultModel: 'oa' },
      modelRequests: { llm: limits },
    });
    return { llm, t };
  } catch (e) {
    await llm.close();
    throw e;
  }
}

/** One assistant chat turn through `t`'s HTTP API. */
const chatTo = (t: TestGateway, message: string, apiKey = TEST_API_KEY, signal?: AbortSignal) =>
  fetch(`${t.baseUrl}/v1/assistant/chat`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ message }),
    ...(signal ? { signal } : {}),
  });

describe('modelRequests.llm: gateway-wide bound on model requests', () => {
  let llm: LlmServer;
  let t: TestGateway;
  const holds = new Map<string, Deferred<void>>();
  const hold = (message: string) => {
    const d = deferred();
    holds.set(message, d);
    return d;
  };
  const releaseAll = () => {
    for (const d of holds.values()) d.resolve();
  };

  beforeAll(async () => {
    ({ llm, t } = await startHeld(holds, { maxConcurrent: 2, maxWaiting: 4, maxWaitingPerTenant: 2, maxWaitMs: 60_000 }));
  });
  afterEach(async () => {
    releaseAll();
    await until(async () => (await t.metric('voxgate_model_requests_in_flight', { kind: 'llm' })) === 0, 'no model request left in flight');
  });
  afterAll(async () => {
    await t?.close();
    await llm?.close();
  });

  const chat = (message: string, apiKey = TEST_API_KEY, signal?: AbortSignal) => chatTo(t, message, apiKey, signal);
  const waiting = (n: number) => until(async () => (await t.metric('voxgate_model_requests_waiting', { kind: 'llm' })) === n, `${n} model requests waiting`);
  const reached = (n: number) => until(() => llm.requests.length === n, `${n} requests at the stand-in`);

  it('lets at most maxConcurrent requests reach the provider; the rest wait, then complete', async () => {
    const base = llm.requests.length;
    const messages = ['cap-1', 'cap-2', 'cap-3', 'cap-4'];
    for (const m of messages) hold(m);
    const replies = messages.map((m) => chat(m));
    await reached(base + 2);
    await waiting(2);
    expect(llm.openConnections()).toBe(2);
    releaseAll();
    const done = await Promise.all(replies);
    expect(done.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect((await Promise.all(done.map((r) => r.json() as Promise<{ text: string }>))).map((b) => b.text).sort()).toEqual(
      messages.map((m) => `answer to ${m}`).sort(),
    );
    expect(llm.requests.length).toBe(base + 4);
    expect(llm.peakOpen()).toBe(2);
  });

  it('refuses a request past the queue with 503, Retry-After and problem+json (MODEL_BUSY), counted', async () => {
    const refusedBefore = await t.metric('voxgate_model_requests_refused_total', { kind: 'llm', reason: 'tenant_queue_full' });
    const messages = ['full-1', 'full-2', 'full-3', 'full-4'];
    for (const m of messages) hold(m);
    const base = llm.requests.length;
    const replies = messages.map((m) => chat(m));
    await waiting(2);
    const refused = await chat('full-5');
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('60');
    expect(refused.headers.get('content-type')).toContain('application/problem+json');
    expect(await refused.json()).toMatchObject({ status: 503, code: 'MODEL_BUSY', kind: 'llm', reason: 'tenant_queue_full', retryAfterSeconds: 60 });
    expect(await t.metric('voxgate_model_requests_refused_total', { kind: 'llm', reason: 'tenant_queue_full' })).toBe(refusedBefore + 1);
    expect(t.logs.some((l) => l['component'] === 'model-requests' && l['reason'] === 'tenant_queue_full')).toBe(true);
    releaseAll();
    expect((await Promise.all(replies)).map((r) => r.status)).toEqual([200, 200, 200, 200]);
    // The refused request never reached the provider.
    expect(llm.requests.slice(base).map(said)).not.toContain('full-5');
  });

  it('one tenant filling its share of the queue does not block another: its request is queued and served in turn', async () => {
    const acme = ['acme-1', 'acme-2', 'acme-3', 'acme-4'];
    for (const m of [...acme, 'globex-1']) hold(m);
    const base = llm.requests.length;
    const replies = acme.map((m) => chat(m, ACME));
    await reached(base + 2);
    await waiting(2);
    // acme has its two waiting: its next is refused, globex's is not.
    expect((await chat('acme-5', ACME)).status).toBe(503);
    const globex = chat('globex-1', GLOBEX);
    await waiting(3);
    const first = said(llm.requests[base]!)!;
    const second = said(llm.requests[base + 1]!)!;
    holds.get(first)!.resolve();
    await reached(base + 3);
    holds.get(second)!.resolve();
    await reached(base + 4);
    // The freed slots went to acme, then to globex: not to acme's second waiter, queued before globex's.
    expect(said(llm.requests[base + 2]!)).toMatch(/^acme-[34]$/);
    expect(said(llm.requests[base + 3]!)).toBe('globex-1');
    releaseAll();
    expect((await Promise.all([...replies, globex])).map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
  });

  it('a request whose caller disconnects while it waits leaves the queue and never reaches the provider', async () => {
    for (const m of ['gone-1', 'gone-2']) hold(m);
    const base = llm.requests.length;
    const held = ['gone-1', 'gone-2'].map((m) => chat(m));
    await reached(base + 2);
    const ac = new AbortController();
    const cancelled = chat('gone-3', TEST_API_KEY, ac.signal).catch((e: unknown) => e);
    await waiting(1);
    ac.abort();
    await cancelled;
    await waiting(0);
    releaseAll();
    expect((await Promise.all(held)).map((r) => r.status)).toEqual([200, 200]);
    // A later request goes straight through; the cancelled one never went out.
    expect((await chat('gone-4')).status).toBe(200);
    expect(llm.requests.slice(base).map(said)).toEqual(['gone-1', 'gone-2', 'gone-4']);
  });

  it('an OpenAI client on /v1/chat/completions reads the refusal as a 503 with its message and code', async () => {
    const messages = ['oa-1', 'oa-2', 'oa-3', 'oa-4'];
    for (const m of messages) hold(m);
    const replies = messages.map((m) => chat(m));
    await waiting(2);
    const client = new OpenAI({ baseURL: `${t.baseUrl}/v1`, apiKey: TEST_API_KEY, maxRetries: 0 });
    const refused = await client.chat.completions.create({ model: 'oa', messages: [{ role: 'user', content: 'oa-5' }] }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.APIError);
    const e = refused as InstanceType<typeof OpenAI.APIError>;
    expect(e.status).toBe(503);
    expect(e.code).toBe('MODEL_BUSY');
    expect(e.headers?.get('retry-after')).toBe('60');
    expect(e.message).toMatch(/busy|waiting/i);
    releaseAll();
    expect((await Promise.all(replies)).map((r) => r.status)).toEqual([200, 200, 200, 200]);
  });
});

describe('modelRequests.llm: one tenant cannot hold every slot', () => {
  let llm: LlmServer;
  let t: TestGateway;
  const holds = new Map<string, Deferred<void>>();

  beforeAll(async () => {
    // maxConcurrentPerTenant unset: three of the four slots.
    ({ llm, t } = await startHeld(holds, { maxConcurrent: 4, maxWaiting: 8, maxWaitingPerTenant: 4, maxWaitMs: 60_000 }));
  });
  afterAll(async () => {
    for (const d of holds.values()) d.resolve();
    await t?.close();
    await llm?.close();
  });

  const chat = (message: string, apiKey: string) => chatTo(t, message, apiKey);

  it("a tenant whose requests outlast the wait holds at most three quarters of the slots: another tenant's request reaches the model at once", async () => {
    const acme = ['long-1', 'long-2', 'long-3', 'long-4'];
    for (const m of [...acme, 'other-1']) holds.set(m, deferred());
    const replies = acme.map((m) => chat(m, ACME));
    await until(async () => (await t.metric('voxgate_model_requests_waiting', { kind: 'llm' })) === 1, "acme's fourth request waiting");
    // Before, acme took all four slots and globex waited for one of acme's (long) requests to end, or was refused.
    const other = chat('other-1', GLOBEX);
    await until(() => llm.requests.length === 4, 'four requests at the stand-in');
    expect(llm.requests.map(said).sort()).toEqual(['long-1', 'long-2', 'long-3', 'other-1']);
    for (const d of holds.values()) d.resolve();
    expect((await Promise.all([...replies, other])).map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(llm.requests.map(said)).toContain('long-4');
  });
});
