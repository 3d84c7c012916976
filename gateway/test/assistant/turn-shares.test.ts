import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Assistant } from '../../src/assistant/assistant.js';
import { ConfigSchema } from '../../src/config.js';
import type { McpHub } from '../../src/hub/hub.js';
import { createLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics.js';
import { shareOf } from '../../src/principal.js';
import { llmModels } from '../../../test/support/assistant.js';
import { startLlmServer, type LlmServer } from '../../../test/support/llm-server.js';

/**
 * `assistant.maxConcurrentTurnsPerTenant` counts turns by share (principal.ts shareOf): devices without a tenant,
 * conversing, used to count as operators, so enough of them talking at once (anyone can be one where enrollment is
 * open) made every operator's chat answer 429 TOO_MANY_TURNS (found by a red team, 2026-11-28).
 */
describe('turns running at once, per share', () => {
  let llm: LlmServer;
  beforeAll(async () => {
    llm = await startLlmServer();
    // Every model request hangs until its turn is cancelled: the turns stay running.
    llm.script(() => ({ hang: true }));
  });
  afterAll(async () => {
    await llm.close();
  });

  // A hub with no tools: the turns below never reach one.
  const hub = { tools: () => [], instructions: () => ({ system: [] }) } as unknown as McpHub;
  const emit = () => undefined;

  it('gives devices without a tenant a share of their own, apart from operators and from each tenant', async () => {
    const a = new Assistant({
      config: ConfigSchema.parse({ assistant: { models: llmModels(llm), defaultModel: 'oa', maxConcurrentTurnsPerTenant: 2 } }).assistant,
      hub,
      log: createLogger('silent'),
      metrics: createMetrics(),
    });
    const start = (caller: Parameters<Assistant['start']>[1]) => a.start({ message: 'hello' }, caller, { stream: true, interactive: false, emit });
    const running: Array<Promise<unknown>> = [];
    try {
      const device = (id: string) => ({ untenantedOnly: true, principal: `device:${id}` });
      for (const id of ['02:00:00:00:00:01', '02:00:00:00:00:02']) running.push((await start(device(id))).done.catch(() => undefined));
      await expect(start(device('02:00:00:00:00:03'))).rejects.toMatchObject({ code: 'TOO_MANY_TURNS' });
      // The devices' share is full; an operator's key and a tenant's key still start turns.
      running.push((await start({ principal: 'ops-key' })).done.catch(() => undefined));
      running.push((await start({ tenant: 'acme', principal: 'acme-key' })).done.catch(() => undefined));
      running.push((await start({ principal: 'ops-key-2' })).done.catch(() => undefined));
      await expect(start({ principal: 'ops-key-3' })).rejects.toMatchObject({ code: 'TOO_MANY_TURNS' });
    } finally {
      a.close();
      await Promise.all(running);
    }
  });

  it('keeps the devices’ share apart from any tenant’s name', () => {
    expect(shareOf({})).toBeUndefined();
    expect(shareOf({ tenant: 'acme' })).toBe('acme');
    expect(shareOf({ tenant: 'acme', untenantedOnly: true })).toBe('acme');
    const devices = shareOf({ untenantedOnly: true });
    expect(devices).toBeDefined();
    expect(devices).not.toBe(shareOf({}));
    expect(devices).toContain('\u0000');
  });
});
