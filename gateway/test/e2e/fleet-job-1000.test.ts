import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayEvent } from '../../src/events/bus.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { LightDevice } from '../fleet/light-device.js';

const N = 1000;
const FIRMWARE = '9.23.0-sim';
const mac = (i: number) => `02:23:00:00:${((i >> 8) & 255).toString(16).padStart(2, '0')}:${(i & 255).toString(16).padStart(2, '0')}`;
/** Offline at the job's start: connected once (so the registry knows them), then dropped. */
const isOffline = (i: number) => i % 10 === 0;
/** `self.light.set` is refused by 1 device in 20 (never an offline one). */
const refusesLight = (i: number) => i % 20 === 1;
/** `self.flaky.run` is refused by 2 devices in 5. */
const refusesFlaky = (i: number) => i % 5 < 2;
/** The hang guard of every wait: generous (a busy 2-core machine); nothing here asserts how long anything took. */
const GUARD_MS = 300_000;

interface Job {
  id: string;
  state: string;
  total: number;
  counts: Record<'queued' | 'sent' | 'succeeded' | 'failed' | 'expired' | 'cancelled', number>;
}
interface JobDevice {
  deviceId: string;
  callId: string;
  state: string;
  error?: { code: string; message: string };
}

/**
 * Issue 23's "job over 1 000 simulated devices, some offline and some failing (abort rule exercised)", through
 * real device sessions: 1 000 light WebSocket devices (gateway/test/fleet/light-device.ts) on an in-process
 * gateway, jobs started through POST /v1/jobs, results read back through the API.
 */
describe('fleet jobs over 1 000 simulated devices on real sessions', { timeout: 600_000 }, () => {
  let t: TestGateway;
  const devices: LightDevice[] = [];
  const ready = new Set<string>();
  const offline = new Set<string>();
  const progress = new Map<string, GatewayEvent>();

  /** Wait for a condition on what the gateway told (events), re-checked on each event. */
  const when = (check: () => boolean, what: string) =>
    new Promise<void>((resolve, reject) => {
      if (check()) return resolve();
      const timer = setTimeout(() => {
        off();
        reject(new Error(`timed out waiting for ${what}`));
      }, GUARD_MS);
      const off = t.gw.bus.subscribe(() => {
        if (!check()) return;
        clearTimeout(timer);
        off();
        resolve();
      });
    });
  /** The job's last progress event says it ended and nothing of it is queued or in flight. */
  const ended = (jobId: string) => () => {
    const d = progress.get(jobId)?.data;
    const c = d?.['counts'] as Job['counts'] | undefined;
    return d !== undefined && d['state'] !== 'running' && c?.queued === 0 && c.sent === 0;
  };
  const connectAll = async (which: LightDevice[]) => {
    let next = 0;
    // A few handshakes at a time: the listen backlog and the machine are finite.
    const worker = async () => {
      while (next < which.length) await which[next++]!.connect(t.wsUrl);
    };
    await Promise.all(Array.from({ length: 20 }, worker));
    await when(() => which.every((d) => ready.has(d.id)), `${which.length} devices ready`);
  };
  const dropOffline = async () => {
    const leaving = devices.filter((_, i) => isOffline(i));
    for (const d of leaving) {
      ready.delete(d.id);
      d.drop();
    }
    await when(() => leaving.every((d) => offline.has(d.id)), 'the offline devices gone');
  };
  const allResults = async (jobId: string): Promise<JobDevice[]> => {
    const out: JobDevice[] = [];
    let cursor: string | undefined;
    do {
      const page = (
        await t.api<{ devices: JobDevice[]; nextCursor?: string }>('GET', `/v1/jobs/${jobId}/devices?limit=500${cursor ? `&cursor=${cursor}` : ''}`)
      ).body;
      out.push(...page.devices);
      cursor = page.nextCursor;
    } while (cursor);
    return out;
  };

  beforeAll(async () => {
    // 1 000 devices from one address (a real fleet comes from many), plus the API's own sockets.
    t = await startTestGateway({ http: { maxConnectionsPerAddress: 4000 } });
    t.gw.bus.subscribe((e) => {
      if (e.type === 'device.ready') {
        ready.add(e.deviceId);
        offline.delete(e.deviceId);
      } else if (e.type === 'device.offline') offline.add(e.deviceId);
      else if (e.type === 'job.progress') progress.set(e.data['jobId'] as string, e);
    });
    for (let i = 0; i < N; i++)
      devices.push(
        new LightDevice(
          mac(i),
          [
            { name: 'self.light.set', answer: () => (refusesLight(i) ? { text: 'the light is locked', isError: true } : { text: 'true', isError: false }) },
            { name: 'self.flaky.run', answer: () => (refusesFlaky(i) ? { text: 'flaky refused', isError: true } : { text: 'true', isError: false }) },
          ],
          FIRMWARE,
        ),
      );
    await connectAll(devices);
  }, GUARD_MS);
  afterAll(async () => {
    for (const d of devices) d.drop();
    await t?.close();
  }, 120_000);

  it('completes over every device: the online ones at once, the offline ones when they return; per-device results and counts', async () => {
    await dropOffline();
    const started = await t.api<Job>('POST', '/v1/jobs', {
      tool: 'self.light.set',
      arguments: { level: 42 },
      filter: { firmware: FIRMWARE },
      concurrency: 50,
      // Present but not reached: 5 % refuse.
      abortOverPercent: 25,
    });
    expect(started.status).toBe(202);
    expect(started.body).toMatchObject({ state: 'running', total: N });
    const jobId = started.body.id;
    const job = async () => (await t.api<Job>('GET', `/v1/jobs/${jobId}`)).body;

    // The online devices are done; the offline ones' calls wait, queued.
    await when(() => {
      const c = progress.get(jobId)?.data['counts'] as Job['counts'] | undefined;
      return c !== undefined && c.queued === N / 10 && c.sent === 0;
    }, 'the online devices done');
    expect(await job()).toMatchObject({ state: 'running', counts: { queued: 100, sent: 0, succeeded: 850, failed: 50 } });

    await connectAll(devices.filter((_, i) => isOffline(i)));
    await when(ended(jobId), 'the job ended');
    const done = await job();
    expect(done).toMatchObject({ state: 'failed', total: N, counts: { queued: 0, sent: 0, succeeded: 950, failed: 50, expired: 0, cancelled: 0 } });

    const results = await allResults(jobId);
    expect(results).toHaveLength(N);
    const byDevice = new Map(results.map((r) => [r.deviceId, r]));
    devices.forEach((d, i) => {
      const r = byDevice.get(d.id)!;
      if (refusesLight(i)) expect(r).toMatchObject({ state: 'failed', error: { code: 'TOOL_ERROR', message: 'the light is locked' } });
      else expect(r.state).toBe('succeeded');
      expect(d.calls.filter((c) => c.tool === 'self.light.set')).toEqual([{ tool: 'self.light.set', args: { level: 42 } }]);
    });
  });

  it('aborts once more than abortOverPercent of its finished calls failed: the rest are cancelled, never sent', async () => {
    await dropOffline();
    const started = await t.api<Job>('POST', '/v1/jobs', {
      tool: 'self.flaky.run',
      arguments: {},
      filter: { firmware: FIRMWARE },
      concurrency: 10,
      abortOverPercent: 20,
    });
    expect(started.status).toBe(202);
    const jobId = started.body.id;
    await when(ended(jobId), 'the job ended');
    const done = (await t.api<Job>('GET', `/v1/jobs/${jobId}`)).body;
    const c = done.counts;
    expect(done.state).toBe('aborted');
    expect(c.queued + c.sent).toBe(0);
    expect(c.succeeded + c.failed + c.cancelled).toBe(N);
    // The offline devices' calls were still queued: cancelled, with the ones not yet sent.
    expect(c.cancelled).toBeGreaterThanOrEqual(N / 10);
    expect(c.failed * 100).toBeGreaterThan(20 * (c.succeeded + c.failed));

    const results = await allResults(jobId);
    expect(results).toHaveLength(N);
    const byDevice = new Map(results.map((r) => [r.deviceId, r]));
    devices.forEach((d, i) => {
      const r = byDevice.get(d.id)!;
      const ran = d.calls.filter((x) => x.tool === 'self.flaky.run');
      if (r.state === 'cancelled') expect(ran).toEqual([]);
      else {
        expect(ran).toHaveLength(1);
        expect(r.state).toBe(refusesFlaky(i) ? 'failed' : 'succeeded');
      }
      if (isOffline(i)) expect(r.state).toBe('cancelled');
    });
  });
});
