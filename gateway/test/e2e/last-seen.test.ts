import { describe, expect, it } from 'vitest';
import { startTestGateway } from '../../../test/support/gateway-harness.js';
import { RawMqtt } from '../../../test/support/raw-mqtt.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { until } from '../../../test/support/wait.js';

interface Listed {
  lastSeenAt: string;
  online: boolean;
}

describe('last seen moves with keepalives (issue 23)', () => {
  it('a WebSocket device that only answers pings, and an MQTT device that only sends PINGREQ, stay freshly seen', async () => {
    // Pings every 100 ms: an idle device's pongs are its only traffic.
    const t = await startTestGateway({ ws: { heartbeatMs: 100 } });
    const ws = new ReferenceDevice({ deviceId: '02:00:00:00:23:61' });
    let mqtt: RawMqtt | undefined;
    const seen = async (id: string) => Date.parse((await t.api<Listed>('GET', `/v1/devices/${id}`)).body.lastSeenAt);
    try {
      const ready = t.nextEvent('device.ready', ws.deviceId);
      await ws.connectWebSocket(t.wsUrl);
      await ready;
      const idleSince = await seen(ws.deviceId);
      await until(async () => (await seen(ws.deviceId)) > idleSince, 'a pong to move last seen', 15_000);

      const id = '02:00:00:00:23:62';
      const online = t.nextEvent('device.online', id);
      const port = Number(new URL(t.mqttUrl).port);
      ({ c: mqtt } = await RawMqtt.connect(port, { clientId: `GID_voxgate@@@${id.replaceAll(':', '_')}@@@u` }));
      await online;
      const before = await seen(id);
      await until(() => Date.now() > before + 2, 'the clock to move');
      mqtt.send({ cmd: 'pingreq' });
      await mqtt.nextOf('pingresp');
      expect(await seen(id)).toBeGreaterThan(before);
    } finally {
      ws.terminate();
      mqtt?.destroy();
      await t.close();
    }
  });
});
