/**
 * The bench's gateway start (bench/lib/compiled.ts `startGateway`), on real processes and sockets: a port taken between
 * the pick and the gateway's bind costs one more start, not the run; a gateway that exits for any other reason fails the
 * start at once with what it printed, not after the readiness budget.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startGateway, type GatewayPorts } from '../lib/compiled.js';
import { gatewayEnv } from '../lib/gateway-env.js';
import { freePort } from '../lib/procs.js';

const API_KEY = 'bench-start-test-key';
/** Far past the test's own timeout: a start that waited it out instead of failing fast would fail the test. */
const READY_MS = 600_000;

describe('the bench gateway start', () => {
  const dirs: string[] = [];
  const taken: Server[] = [];
  afterAll(() => {
    for (const s of taken) s.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  const dataDir = () => {
    const d = mkdtempSync(join(tmpdir(), 'voxgate-bench-start-'));
    dirs.push(d);
    return d;
  };
  const envFor =
    (dir: string, extra: Record<string, string> = {}) =>
    async (p: GatewayPorts) => ({
      ...(await gatewayEnv({ dataDir: dir, apiKey: API_KEY, ...p })).env,
      ...extra,
    });

  it('starts again on new ports when a picked port was taken before the gateway bound it', { timeout: 120_000 }, async () => {
    // A port someone else holds, handed out as if it were free: the first start meets EADDRINUSE.
    const holder = createServer();
    taken.push(holder);
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const busy = (holder.address() as { port: number }).port;
    const picks: GatewayPorts[] = [];
    const ports = async (): Promise<GatewayPorts> => {
      const p = { httpPort: picks.length === 0 ? busy : await freePort(), mqttPort: await freePort() };
      picks.push(p);
      return p;
    };
    const gw = await startGateway('start-test', { env: envFor(dataDir()), readyMs: READY_MS }, ports);
    try {
      expect(gw.attempts).toBe(2);
      expect(picks).toHaveLength(2);
      expect(gw.httpPort).toBe(picks[1]!.httpPort);
      expect((await fetch(`${gw.url}/readyz`)).status).toBe(200);
    } finally {
      await gw.proc.stop();
    }
  });

  it('fails at once, with what the gateway printed, when it exits for another reason', { timeout: 120_000 }, async () => {
    const start = startGateway('bad-config', { env: envFor(dataDir(), { GATEWAY_LOG_LEVEL: 'loud' }), readyMs: READY_MS });
    await expect(start).rejects.toThrow(/bad-config exited \(2\) before it was ready, start 1 of at most 5: .*GATEWAY_LOG_LEVEL/);
  });
});
