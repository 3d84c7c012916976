import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startNatsServer, type NatsServer } from '../../../test/support/nats-server.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { until } from '../../../test/support/wait.js';

interface Device {
  id: string;
  online: boolean;
  name: string | null;
  room: string | null;
}

/** Device records live in the cluster's shared KV bucket: one instance names, every instance lists the name (issue 23). */
describe('the fleet registry in a cluster', () => {
  let nats: NatsServer;
  const gws: TestGateway[] = [];

  beforeAll(async () => {
    nats = await startNatsServer();
    for (const name of ['a', 'b'])
      gws.push(await startTestGateway({ cluster: { enabled: true, instanceId: `gw-${name}`, nats: { servers: [nats.url] }, heartbeatMs: 2_000 } }));
  }, 120_000);
  afterAll(async () => {
    await Promise.all(gws.map((g) => g.close()));
    await nats?.stop();
  }, 60_000);

  it('names a device held by one instance through another; a DELETE on the other closes it and every instance forgets it, its OTA report too', async () => {
    const [a, b] = gws as [TestGateway, TestGateway];
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:23:81' });
    try {
      const ready = a.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(a.wsUrl);
      await ready;
      // The record reaches the bucket in a batch: until then b cannot name it.
      await until(async () => (await b.api('PATCH', `/v1/devices/${d.deviceId}`, { name: 'Hall lamp', room: 'Hall' })).status === 200, 'b to know the record');
      await until(async () => (await a.api<Device>('GET', `/v1/devices/${d.deviceId}`)).body.name === 'Hall lamp', 'a to see the name');
      expect((await b.api<{ devices: Device[] }>('GET', '/v1/devices?room=hall')).body.devices).toMatchObject([
        { id: d.deviceId, online: true, name: 'Hall lamp' },
      ]);

      // Its OTA check reaches a, under the client id it connects with: a keeps the report (in memory, a's own).
      const check = await fetch(`${a.baseUrl}/xiaozhi/ota/`, {
        method: 'POST',
        headers: { 'device-id': d.deviceId, 'client-id': d.clientId, 'user-agent': 'voxgate-devkit/1.0.0', 'content-type': 'application/json' },
        body: JSON.stringify({ application: { version: '2.3.81' } }),
      });
      expect(check.status).toBe(200);
      const reported = async (g: TestGateway) =>
        (await g.api<{ reported: { version: string | null } | null }>('GET', `/v1/devices/${d.deviceId}/firmware`)).body.reported;
      expect(await reported(a)).toEqual({ version: '2.3.81', boards: [] });

      expect((await b.api('DELETE', `/v1/devices/${d.deviceId}`)).status).toBe(204);
      expect((await d.closed()).code).toBe(4006);
      for (const g of gws) await until(async () => (await g.api('GET', `/v1/devices/${d.deviceId}`)).status === 404, 'every instance to forget it');
      // The DELETE on b reaches a's report too (the forget of the shared record, as it reached a's registry).
      await until(async () => (await reported(a)) === null, "a to forget the device's OTA report");
    } finally {
      d.terminate();
    }
  }, 120_000);
});
