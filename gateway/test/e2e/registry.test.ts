import { describe, expect, it } from 'vitest';
import { startTestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

interface Listed {
  devices: Array<{ id: string; online: boolean; transport: string }>;
}

describe('device registry', () => {
  it('filters the device list, and forgets the least recently seen offline devices past its cap', async () => {
    const t = await startTestGateway({ devices: { maxKnown: 3 } });
    try {
      const ids = ['02:00:00:00:06:01', '02:00:00:00:06:02', '02:00:00:00:06:03'];
      for (const id of ids) {
        const d = new ReferenceDevice({ deviceId: id });
        const ready = t.nextEvent('device.ready', id);
        await d.connectWebSocket(t.wsUrl);
        await ready;
        if (id !== ids[2]) {
          const offline = t.nextEvent('device.offline', id);
          await d.close();
          await offline;
        }
      }
      const online = await t.api<Listed>('GET', '/v1/devices?online=true');
      expect(online.body.devices.map((d) => d.id)).toEqual([ids[2]]);
      const offline = await t.api<Listed>('GET', '/v1/devices?online=false&transport=websocket');
      expect(offline.body.devices.map((d) => d.id)).toEqual([ids[0], ids[1]]);
      expect((await t.api<Listed>('GET', '/v1/devices?transport=mqtt')).body.devices).toEqual([]);
      expect((await t.api<{ code: string }>('GET', '/v1/devices?online=maybe')).status).toBe(400);

      // A fourth device: the registry is full, so the offline device seen longest ago is forgotten.
      const fourth = new ReferenceDevice({ deviceId: '02:00:00:00:06:04' });
      const ready = t.nextEvent('device.ready', fourth.deviceId);
      await fourth.connectWebSocket(t.wsUrl);
      await ready;
      const all = await t.api<Listed>('GET', '/v1/devices');
      expect(all.body.devices.map((d) => d.id).sort()).toEqual([ids[1], ids[2], '02:00:00:00:06:04']);
      expect((await t.api<{ code: string }>('GET', `/v1/devices/${ids[0]}`)).body.code).toBe('DEVICE_NOT_FOUND');
      fourth.terminate();
    } finally {
      await t.close();
    }
  });

  it('bounds what a device can put into an event', async () => {
    const t = await startTestGateway();
    try {
      const d = new ReferenceDevice({ deviceId: '02:00:00:00:06:05' });
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(t.wsUrl);
      await ready;
      const big = t.nextEvent('device.message', d.deviceId);
      d.sendRaw(JSON.stringify({ session_id: d.sessionId, type: 'listen', state: 'detect', text: 'y'.repeat(20_000) }));
      expect((await big).data).toEqual({ message: { truncated: true, bytes: expect.any(Number), type: 'listen' } });
      const note = t.nextEvent('device.notification', d.deviceId);
      d.notify('notifications/state_changed', { blob: 'z'.repeat(20_000) });
      expect((await note).data).toMatchObject({ method: 'notifications/state_changed', params: { truncated: true } });
      d.terminate();
    } finally {
      await t.close();
    }
  });
});
