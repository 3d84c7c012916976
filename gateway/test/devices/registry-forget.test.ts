import { describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../src/config.js';
import { createRegistry } from '../../src/devices/create.js';
import { metricValue } from '../../../test/support/device-parts.js';
import { registryPart } from '../../../test/support/registry-parts.js';

/** The registry alone: devices connect over in-memory links (no gateway, no sockets). */
describe('forgetting devices past devices.maxKnown (issue 8, defect 10b)', () => {
  it('forgets offline never-ready devices first, then the least recently seen, never an online one', async () => {
    const part = registryPart({ maxKnownDevices: 4 });
    const known = () => part.registry.page({}, { limit: 1000 }).devices.map((d) => d.id);
    try {
      // Seen longest ago, but it was a real device: initialized and listed its tools.
      await part.connect('02:00:00:00:11:01', true);
      await part.disconnect('02:00:00:00:11:01');
      // Two ids that connected and never initialized (what a flood of forged ids looks like), seen later.
      for (const id of ['02:00:00:00:11:02', '02:00:00:00:11:03']) {
        await part.connect(id);
        await part.disconnect(id);
      }
      await part.connect('02:00:00:00:11:04', true); // online: never forgotten

      await part.connect('02:00:00:00:12:01');
      expect(known()).toEqual(['02:00:00:00:11:01', '02:00:00:00:11:03', '02:00:00:00:11:04', '02:00:00:00:12:01']);
      await part.connect('02:00:00:00:12:02');
      expect(known()).toEqual(['02:00:00:00:11:01', '02:00:00:00:11:04', '02:00:00:00:12:01', '02:00:00:00:12:02']);
      expect(await metricValue(part.metrics, 'voxgate_devices_forgotten_total', { kind: 'never_ready' })).toBe(2);
      // Only the veteran is offline now: it goes next.
      await part.connect('02:00:00:00:12:03');
      expect(known()).toEqual(['02:00:00:00:11:04', '02:00:00:00:12:01', '02:00:00:00:12:02', '02:00:00:00:12:03']);
      expect(await metricValue(part.metrics, 'voxgate_devices_forgotten_total', { kind: 'offline' })).toBe(1);
      // Every device online: the bound cannot drop a connected device, so the list grows past it.
      await part.connect('02:00:00:00:12:04');
      expect(known().length).toBe(5);
    } finally {
      await part.close();
    }
  });

  it('defaults to a bound a gateway can hold and list (50 000)', () => {
    expect(ConfigSchema.parse({}).devices.maxKnown).toBe(50_000);
  });

  it('takes the bound from devices.maxKnown when the registry is created from the configuration', async () => {
    const config = ConfigSchema.parse({ devices: { maxKnown: 1 } });
    const part = registryPart({ create: (deps) => createRegistry(deps, { ...config, visionRefreshMs: undefined }) });
    try {
      await part.connect('02:00:00:00:13:01');
      await part.disconnect('02:00:00:00:13:01');
      await part.connect('02:00:00:00:13:02');
      expect(part.registry.page({}, { limit: 10 }).devices.map((d) => d.id)).toEqual(['02:00:00:00:13:02']);
    } finally {
      await part.close();
    }
  });
});
