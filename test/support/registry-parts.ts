/**
 * A device registry built directly (no gateway, no sockets): devices connect over in-memory links and go
 * away when told, and the bus records every event, for tests of what the registry lists and forgets.
 */
import { DeviceRegistry, type RegistryDeps } from '../../gateway/src/devices/registry.js';
import { ToolsPageCache } from '../../gateway/src/devices/tools-page-cache.js';
import { createMetrics } from '../../gateway/src/metrics.js';
import { SchemaValidators } from '../../gateway/src/schemas/validators.js';
import type { GatewayEvent } from '../../gateway/src/events/bus.js';
import { answerSetup, recordingBus, silentLog, testSettings } from './device-parts.js';
import { createLinkedPair, type InMemoryDevice } from './in-memory-link.js';

export interface RegistryPartOptions {
  maxKnownDevices?: number;
  /** Build the registry another way (createRegistry from configuration slices, say) from these parts. */
  create?: (deps: Omit<RegistryDeps, 'settings' | 'maxKnownDevices' | 'pages'>) => DeviceRegistry;
}

/** The registry, its metrics and events, and devices to connect to it. */
export function registryPart(o: RegistryPartOptions = {}) {
  const metrics = createMetrics();
  const { bus, events } = recordingBus();
  // Long request deadlines: a device left in setup does not time out while a test looks at it.
  const settings = testSettings({ requestTimeoutMs: 120_000 });
  const deps = { log: silentLog, bus, metrics, vision: () => undefined, validators: new SchemaValidators({ limits: settings.schemaLimits, maxCached: 16 }) };
  const registry = o.create
    ? o.create(deps)
    : new DeviceRegistry({
        ...deps,
        ...(o.maxKnownDevices !== undefined ? { maxKnownDevices: o.maxKnownDevices } : {}),
        settings,
        pages: new ToolsPageCache(),
      });
  const devices = new Map<string, InMemoryDevice>();
  const next = (type: GatewayEvent['type'], deviceId: string) =>
    new Promise<void>((resolve) => {
      const off = bus.subscribe((e) => {
        if (e.type === type && e.deviceId === deviceId) resolve(void off());
      });
    });

  /** A WebSocket device connects: `ready` answers setup with no tools, else it stays waiting for its hello. */
  async function connect(deviceId: string, ready = false): Promise<InMemoryDevice> {
    const [link, device] = createLinkedPair('websocket');
    const readied = next('device.ready', deviceId);
    const session = registry.connect({ deviceId, clientId: `c-${deviceId}`, link, expectHello: ready ? false : true })!;
    link.receiver = { onText: (t) => session.onText(t), onBinary: (b) => session.onBinary(b), onClosed: (r) => session.onClosed(r) };
    if (ready) {
      await answerSetup(device, []);
      await readied;
    }
    devices.set(deviceId, device);
    return device;
  }

  /** The device goes away; resolves once the registry has it offline. */
  async function disconnect(deviceId: string): Promise<void> {
    const offline = next('device.offline', deviceId);
    devices.get(deviceId)!.disconnect();
    await offline;
    devices.delete(deviceId);
  }

  /** Every device still connected goes away. */
  async function close(): Promise<void> {
    for (const id of [...devices.keys()]) await disconnect(id);
  }

  return { registry, metrics, bus, events, connect, disconnect, close };
}
