import { GatewayError } from '../errors.js';
import type { ToolCatalog } from './catalog.js';
import type { DeviceHandle } from './device-handle.js';
import { upperBound } from './sorted-ids.js';

export interface DeviceSummary {
  id: string;
  clientId: string;
  transport: 'websocket' | 'mqtt';
  online: boolean;
  state: string;
  connectedAt: string;
  lastSeenAt: string;
  server: { name: string; version: string } | null;
  protocolVersion: string | null;
  toolCount: number;
  toolsHash: string | null;
  pendingCalls: number;
  /** Present when the device refused part of its catalog for good (see devices/setup.ts). */
  catalogWarning?: string;
}

export interface DeviceFilter {
  online?: boolean;
  transport?: 'websocket' | 'mqtt';
}

export function matchesFilter(d: { online: boolean; transport: 'websocket' | 'mqtt' }, filter: DeviceFilter): boolean {
  return (filter.online === undefined || d.online === filter.online) && (filter.transport === undefined || d.transport === filter.transport);
}

export interface DevicePage {
  devices: DeviceSummary[];
  /** The id to continue after, when there may be more. */
  next: string | undefined;
}

export interface PageRequest {
  limit: number;
  after?: string | undefined;
}

/** A ready device and its catalog, wherever it is held. */
export interface ReadyDevice {
  deviceId: string;
  catalog?: ToolCatalog | undefined;
  state?: string;
}

/** Where callers find devices: this instance's registry, and (cluster) the devices other instances hold. */
export interface DeviceDirectory {
  /** The device to call, or undefined when it is not connected anywhere known (the normal "not here"). */
  find(deviceId: string): DeviceHandle | undefined;
  /** The device to call, or the reason there is none (DEVICE_NOT_FOUND, DEVICE_OFFLINE): for API use. */
  device(deviceId: string): DeviceHandle;
  get(deviceId: string): DeviceSummary | undefined;
  /** One page of devices in id order, starting after the device id `after` (which may since have been forgotten). */
  page(filter: DeviceFilter, opts: PageRequest): DevicePage;
  /** Ready devices with their catalogs. */
  ready(): ReadyDevice[];
  /** Called when devices held elsewhere change (presence, catalogs); returns the unsubscribe. */
  onChange(fn: () => void): () => void;
}

/** This instance's devices, as the directory composes them (devices/registry.ts). */
export interface LocalDevices extends DeviceDirectory {
  /** Every device id known here, sorted. */
  ids(): readonly string[];
}

/** Devices held by other instances (cluster/): a handle to call one, and its summary. */
export interface RemoteDevices {
  /** A device online on another live instance, or undefined. */
  find(deviceId: string): DeviceHandle | undefined;
  /** Whether the cluster knows the device at all (online or not). */
  knows(deviceId: string): boolean;
  summary(deviceId: string): DeviceSummary | undefined;
  /** Ready devices on other live instances whose catalogs are known here. */
  ready(): ReadyDevice[];
  /** Every device id the cluster knows, sorted (the listing pages through them with the local ones). */
  ids(): readonly string[];
  onChange(fn: () => void): () => void;
}

/**
 * The directory the root composes: the local registry, and once the cluster has joined, the devices the
 * other instances hold. A device connected here always wins.
 */
export class FleetDirectory implements DeviceDirectory {
  private remote: RemoteDevices | undefined;
  private readonly listeners = new Set<() => void>();

  constructor(private readonly local: LocalDevices) {}

  /** The cluster's part, once it has joined. */
  attach(remote: RemoteDevices): void {
    this.remote = remote;
    remote.onChange(() => {
      for (const fn of this.listeners) fn();
    });
  }

  find(deviceId: string): DeviceHandle | undefined {
    return this.local.find(deviceId) ?? this.remote?.find(deviceId);
  }

  device(deviceId: string): DeviceHandle {
    const found = this.find(deviceId);
    if (found) return found;
    // Known to the cluster, but offline (or its instance is gone): offline, not "never connected".
    if (this.remote?.knows(deviceId)) throw new GatewayError('DEVICE_OFFLINE', `device ${deviceId} is offline`);
    return this.local.device(deviceId);
  }

  get(deviceId: string): DeviceSummary | undefined {
    const mine = this.local.get(deviceId);
    if (this.remote && !mine?.online) return this.remote.summary(deviceId) ?? mine;
    return mine;
  }

  ready(): ReadyDevice[] {
    const remote = this.remote?.ready() ?? [];
    const local = this.local.ready();
    return remote.length === 0 ? local : [...local, ...remote];
  }

  onChange(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** The local ids and the cluster's merged in order, each device as `get` sees it. */
  page(filter: DeviceFilter, opts: PageRequest): DevicePage {
    if (!this.remote) return this.local.page(filter, opts);
    const local = this.local.ids();
    const remote = this.remote.ids();
    const devices: DeviceSummary[] = [];
    let i = opts.after === undefined ? 0 : upperBound(local, opts.after);
    let j = opts.after === undefined ? 0 : upperBound(remote, opts.after);
    while (devices.length < opts.limit && (i < local.length || j < remote.length)) {
      const a = local[i];
      const b = remote[j];
      const id = b === undefined || (a !== undefined && a <= b) ? a! : b;
      if (a === id) i++;
      if (b === id) j++;
      const s = this.get(id);
      if (s && matchesFilter(s, filter)) devices.push(s);
    }
    const more = devices.length === opts.limit && (i < local.length || j < remote.length);
    return { devices, next: more ? devices[devices.length - 1]!.id : undefined };
  }
}
