import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startClusterMember } from '../../../test/support/gateway-process.js';
import { startNatsServer, type NatsServer } from '../../../test/support/nats-server.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { deferred, until } from '../../../test/support/wait.js';

/**
 * A forwarded call whose owner is lost answers 503 DEVICE_OFFLINE as soon as that is known, not 504 at
 * its timeout + 2 s (issue 20 item 9). Heartbeats are slow here, so presence alone cannot decide within
 * a call's timeout: what ends the call is NATS itself (nobody listens on the owner's subject any more, or
 * this instance's own NATS connection dropped).
 */
const HEARTBEAT_MS = 20_000;
/** Long, so that neither the owner's own timeout nor 3 missed heartbeats can end the call first on a busy machine. */
const CALL_TIMEOUT_MS = 20_000;

interface Problem {
  code?: string;
}

describe('forwarded calls to a lost owner (issue 20 item 9)', () => {
  let nats: NatsServer;
  let a: TestGateway;
  const devices: ReferenceDevice[] = [];
  const cluster = (id: string) => ({ cluster: { enabled: true, instanceId: id, nats: { servers: [nats.url] }, heartbeatMs: HEARTBEAT_MS } });
  const ping = (d: ReferenceDevice) => a.api<Problem>('POST', `/v1/devices/${d.deviceId}/tools/self.ping/call`, { arguments: {} });
  /** A device whose `self.hang` tool starts (the test hears it) and finishes only when released. */
  const hanging = (deviceId: string) => {
    const started = deferred();
    const release = deferred();
    const d = new ReferenceDevice({
      deviceId,
      tools: [
        { name: 'self.ping', description: 'Answers', run: () => true },
        { name: 'self.hang', description: 'Never finishes', run: async () => (started.resolve(), await release.promise, 'released') },
      ],
    });
    devices.push(d);
    return { d, started, release };
  };
  /** A call through gw-a that the device holds: resolves once the device runs it, with the pending answer. */
  const callInHand = async (h: { d: ReferenceDevice; started: { promise: Promise<void> } }) => {
    await until(async () => (await ping(h.d)).status === 200, `a call through gw-a to ${h.d.deviceId}`);
    const inFlight = a.api<Problem>('POST', `/v1/devices/${h.d.deviceId}/tools/self.hang/call`, { arguments: {}, timeoutMs: CALL_TIMEOUT_MS });
    await h.started.promise;
    return { inFlight }; // wrapped: an async function returning the promise itself would wait for it
  };

  beforeAll(async () => {
    nats = await startNatsServer();
    a = await startTestGateway(cluster('gw-a'));
  });
  afterAll(async () => {
    for (const d of devices) d.terminate();
    await a?.close();
    await nats?.stop();
  });

  it('the owning instance is killed mid-call: 503 DEVICE_OFFLINE, not a 504 at the timeout', async () => {
    const owner = startClusterMember(nats.url, 'gw-owner', HEARTBEAT_MS, TEST_API_KEY);
    try {
      const started = await owner.logLine('voxgate started');
      const h = hanging('02:00:00:00:15:01');
      const d = h.d;
      const relayed = a.nextEvent('device.ready', d.deviceId, 30_000);
      await d.connectWebSocket(`ws://${String(started['http'])}/xiaozhi/v1/`);
      await relayed;
      const { inFlight } = await callInHand(h);
      owner.child.kill('SIGKILL');
      await owner.exited;
      const r = await inFlight;
      expect([r.status, r.body.code]).toEqual([503, 'DEVICE_OFFLINE']);
      expect(await a.metric('voxgate_cluster_forwarded_calls_total', { outcome: 'DEVICE_TIMEOUT' })).toBe(0);
    } finally {
      owner.dispose();
    }
  }, 90_000);

  it('NATS vanishes mid-call: 503 DEVICE_OFFLINE; calls go through again once it is back', async () => {
    const b = await startTestGateway(cluster('gw-b'));
    try {
      const h = hanging('02:00:00:00:15:02');
      const d = h.d;
      const ready = b.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(b.wsUrl);
      await ready;
      const { inFlight } = await callInHand(h);
      await nats.restart(); // stopped, then started again on the same port: every connection dropped
      const r = await inFlight;
      expect([r.status, r.body.code]).toEqual([503, 'DEVICE_OFFLINE']);
      expect(await a.metric('voxgate_cluster_forwarded_calls_total', { outcome: 'DEVICE_TIMEOUT' })).toBe(0);
      // Back on NATS, calls go through again (the device's firmware loop is freed first).
      h.release.resolve();
      await until(async () => (await ping(d)).status === 200, 'a call through gw-a after NATS is back', 30_000);
    } finally {
      await b.close();
    }
  }, 90_000);
});
