import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { until } from '../../../test/support/wait.js';

/**
 * Queued calls are held in memory and read whole at every start. Each call's arguments were bounded (16 KiB) and so
 * was their number (100 per device, 25 000 per tenant, 100 000 in all), but not their bytes: one tenant's key could make
 * the store and the heap hold 25 000 × 16 KiB, and calls that expired or were cancelled kept theirs for a week
 * (red team 9). Now the arguments the unfinished calls hold are bounded in bytes, in all and per tenant
 * (`fleet.maxQueuedBytes`, `maxQueuedBytesPerTenant`), and so are the finished calls kept (`fleet.keepFinishedBytes`):
 * counted again from the store after a restart.
 */
const KEY_A = 'key-tenant-acme-bytes-0123456789';
const DEV_A = '02:00:00:00:9c:01';
const DEV_OPS = '02:00:00:00:9c:02';
/** About 3 000 bytes of JSON arguments. */
const args = { text: 'x'.repeat(2990) };

interface Call {
  id: string;
  state: string;
}
interface Problem {
  code: string;
  detail?: string;
}

describe('queued calls are bounded in bytes (red team 9)', () => {
  const gateways: TestGateway[] = [];
  let dir = '';
  afterEach(async () => {
    for (const g of gateways.splice(0)) await g.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const start = async () => {
    const g = await startTestGateway(
      {
        apiKeys: [TEST_API_KEY, KEY_A],
        apiKeyTenants: { [KEY_A]: 'acme' },
        // 40 000 bytes in all, a quarter (10 000) per tenant; finished calls keep at most 7 000.
        fleet: { maxQueuedBytes: 40_000, keepFinishedBytes: 7_000, sweepIntervalMs: 500 },
      },
      {},
      { dataDir: dir },
    );
    gateways.push(g);
    return g;
  };
  const queue = (g: TestGateway, device: string, apiKey = TEST_API_KEY) =>
    g.api<Call & Problem>('POST', `/v1/devices/${device}/calls`, { tool: 'self.note', arguments: args, ttlMs: 3_600_000 }, { apiKey });

  it("refuses a call past the tenant's and the total bytes, after a restart too, and forgets finished calls past their bytes", async () => {
    dir = mkdtempSync(join(tmpdir(), 'voxgate-call-bytes-'));
    let g = await start();
    expect((await g.api('PATCH', `/v1/devices/${DEV_A}`, { tenant: 'acme' })).status).toBe(200);
    const mine: string[] = [];
    for (let n = 0; n < 3; n++) {
      const r = await queue(g, DEV_A, KEY_A);
      expect(r.status).toBe(202);
      mine.push(r.body.id);
    }
    // A fourth would hold over 10 000 bytes for acme. Before: accepted, up to 25 000 calls of 16 KiB.
    const refused = await queue(g, DEV_A, KEY_A);
    expect(refused.status).toBe(429);
    expect(refused.body.code).toBe('QUEUE_FULL');
    expect(await g.metric('voxgate_queued_call_bytes_bound_total', { bound: 'queued_tenant' })).toBe(1);
    // The operators fill the rest of the 40 000.
    for (let n = 0; n < 10; n++) expect((await queue(g, DEV_OPS)).status).toBe(202);
    expect((await queue(g, DEV_OPS)).status).toBe(429);
    expect(await g.metric('voxgate_queued_call_bytes_bound_total', { bound: 'queued_total' })).toBe(1);
    gateways.splice(0);
    await g.close();

    // Counted again from the store: still full.
    g = await start();
    expect((await queue(g, DEV_A, KEY_A)).status).toBe(429);
    expect((await queue(g, DEV_OPS)).status).toBe(429);
    // Cancelled, acme's three calls are finished: 9 000 bytes kept, over 7 000, so the sweep forgets the oldest.
    for (const id of mine) expect((await g.api<Call>('DELETE', `/v1/calls/${id}`, undefined, { apiKey: KEY_A })).body.state).toBe('cancelled');
    await until(async () => (await g.api('GET', `/v1/calls/${mine[0]}`, undefined, { apiKey: KEY_A })).status === 404, 'the oldest finished call forgotten');
    expect((await g.api('GET', `/v1/calls/${mine[2]}`, undefined, { apiKey: KEY_A })).status).toBe(200);
    expect(await g.metric('voxgate_queued_call_bytes_bound_total', { bound: 'finished' })).toBe(1);
    // Its room came back: acme may queue again.
    expect((await queue(g, DEV_A, KEY_A)).status).toBe(202);
  }, 120_000);
});
