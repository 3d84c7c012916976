import { describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../src/config.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

interface Listed {
  devices: Array<{ id: string }>;
}

describe('forgetting devices past devices.maxKnown (issue 8, defect 10b)', () => {
  it('forgets offline never-ready devices first, then the least recently seen, never an online one', async () => {
    const t = await startTestGateway({ devices: { maxKnown: 4 }, session: { requestTimeoutMs: 120_000 } });
    const live: ReferenceDevice[] = [];
    const connect = async (id: string, ready: boolean): Promise<ReferenceDevice> => {
      const d = new ReferenceDevice({ deviceId: id });
      const seen = t.nextEvent(ready ? 'device.ready' : 'device.online', id);
      await d.connectWebSocket(t.wsUrl, { skipHello: !ready });
      await seen;
      live.push(d);
      return d;
    };
    const disconnect = async (t: TestGateway, d: ReferenceDevice) => {
      const offline = t.nextEvent('device.offline', d.deviceId);
      d.terminate();
      await offline;
    };
    const known = async () => (await t.api<Listed>('GET', '/v1/devices')).body.devices.map((d) => d.id);
    try {
      // Seen longest ago, but it was a real device: initialized and listed its tools.
      const veteran = await connect('02:00:00:00:11:01', true);
      await disconnect(t, veteran);
      // Two ids that connected and never initialized (what a flood of forged ids looks like), seen later.
      for (const id of ['02:00:00:00:11:02', '02:00:00:00:11:03']) await disconnect(t, await connect(id, false));
      await connect('02:00:00:00:11:04', true); // online: never forgotten

      await connect('02:00:00:00:12:01', false);
      expect(await known()).toEqual(['02:00:00:00:11:01', '02:00:00:00:11:03', '02:00:00:00:11:04', '02:00:00:00:12:01']);
      await connect('02:00:00:00:12:02', false);
      expect(await known()).toEqual(['02:00:00:00:11:01', '02:00:00:00:11:04', '02:00:00:00:12:01', '02:00:00:00:12:02']);
      expect(await t.metric('voxgate_devices_forgotten_total', { kind: 'never_ready' })).toBe(2);
      // Only the veteran is offline now: it goes next.
      await connect('02:00:00:00:12:03', false);
      expect(await known()).toEqual(['02:00:00:00:11:04', '02:00:00:00:12:01', '02:00:00:00:12:02', '02:00:00:00:12:03']);
      expect(await t.metric('voxgate_devices_forgotten_total', { kind: 'offline' })).toBe(1);
      // Every device online: the bound cannot drop a connected device, so the list grows past it.
      await connect('02:00:00:00:12:04', false);
      expect((await known()).length).toBe(5);
    } finally {
      for (const d of live) d.terminate();
      await t.close();
    }
  });

  it('defaults to a bound a gateway can hold and list (50 000)', () => {
    expect(ConfigSchema.parse({}).devices.maxKnown).toBe(50_000);
  });
});
