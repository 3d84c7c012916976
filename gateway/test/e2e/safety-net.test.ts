import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { GATEWAY_MAIN, isolatedEnv, ROOT, spawnGateway, type GatewayProcess } from '../../../test/support/gateway-process.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

const KEY = 'safety-net-test-key-0123';
const INJECTOR = join(ROOT, 'test/support/fault-injector.mjs');

/** The compiled gateway, with a preload that raises an unhandled rejection or exception on SIGWINCH. */
function startWithFault(fault: 'rejection' | 'exception'): { run: GatewayProcess; dataDir: string } {
  const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-net-'));
  writeFileSync(join(dataDir, 'gateway.config.json'), '{}');
  const run = spawnGateway(
    process.execPath,
    ['--import', INJECTOR, GATEWAY_MAIN],
    isolatedEnv(dataDir, { GATEWAY_API_KEYS: KEY, VOXGATE_TEST_FAULT: fault }),
  );
  return { run, dataDir };
}

async function counter(base: string, kind: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${KEY}` } })).text();
  const m = new RegExp(`^voxgate_unhandled_errors_total\\{kind="${kind}"\\} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

describe('process-level safety net (issue 8, defect 1)', () => {
  const cleanup: Array<() => void> = [];
  afterEach(() => {
    for (const f of cleanup.splice(0)) f();
  });

  it('logs and counts an unhandled rejection, and keeps serving every device', async () => {
    const { run, dataDir } = startWithFault('rejection');
    const device = new ReferenceDevice({ deviceId: '02:00:00:00:10:01' });
    cleanup.push(() => (device.terminate(), run.child.kill('SIGKILL'), rmSync(dataDir, { recursive: true, force: true })));
    const started = (await run.logLine('voxgate started')) as { http: string };
    const base = `http://${started.http}`;
    await device.connectWebSocket(`ws://${started.http}/xiaozhi/v1/`);

    run.child.kill('SIGWINCH');
    const line = await run.logLine('unhandled promise rejection; the gateway goes on');
    expect(line).toMatchObject({ level: 50, err: { message: 'injected unhandled rejection' } });
    expect(await counter(base, 'rejection')).toBe(1);
    // Still serving: the API answers, the device is still connected and callable.
    const call = await fetch(`${base}/v1/devices/${device.deviceId}/tools/self.get_device_status/call`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ arguments: {} }),
    });
    expect(call.status).toBe(200);

    run.child.kill('SIGTERM');
    expect((await device.closed()).code).toBe(1001);
    expect(await run.exited).toEqual({ code: 0, signal: null });
  }, 60_000);

  it('logs an uncaught exception as fatal, then stops gracefully (devices get 1001) and exits 1', async () => {
    const { run, dataDir } = startWithFault('exception');
    const device = new ReferenceDevice({ deviceId: '02:00:00:00:10:02' });
    cleanup.push(() => (device.terminate(), run.child.kill('SIGKILL'), rmSync(dataDir, { recursive: true, force: true })));
    const started = (await run.logLine('voxgate started')) as { http: string };
    await device.connectWebSocket(`ws://${started.http}/xiaozhi/v1/`);

    run.child.kill('SIGWINCH');
    expect((await device.closed()).code).toBe(1001);
    expect(await run.exited).toEqual({ code: 1, signal: null });
    const fatal = run.logs.find((l) => l.msg === 'uncaught exception; stopping the gateway (state may be inconsistent)');
    expect(fatal).toMatchObject({ level: 60, err: { message: 'injected uncaught exception' } });
    expect(run.logs.map((l) => l.msg)).toContain('stopped');
  }, 60_000);
});
