import { GatewayError } from '../errors.js';
import type { ToolCatalog } from './catalog.js';
import type { DeviceHandle } from './device-handle.js';
import { recordFields, type RecordFields } from './record-fields.js';
import type { DeviceRecords } from './records.js';
import { upperBound } from './sorted-ids.js';

/** A device's presence: where it is connected, over what, since when (the registry's, or another instance's). */
export interface DevicePresence {
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

/** A device as it is listed: its presence and its lasting record (records.ts). */
export interface DeviceSummary extends DevicePresence, RecordFields {}

export interface DeviceFilter {
  online?: boolean;
  transport?: 'websocket' | 'mqtt';
  /** Every one of these tags. */
  tags?: readonly string[];
  /** The room, ignoring case. */
  room?: string;
  /** Part of the name, ignoring case. */
  name?: string;
  board?: string;
  /** The firmware version: the device's initialize answer, else what it reported to the OTA endpoint. */
  firmware?: string;
}

export function matchesFilter(d: DeviceSummary, f: DeviceFilter): boolean {
  if (f.online !== undefined && d.online !== f.online) return false;
  if (f.transport !== undefined && d.transport !== f.transport) return false;
  if (f.board !== undefined && d.board !== f.board) return false;
  if (f.firmware !== undefined && (d.server?.version ?? d.firmware) !== f.firmware) return false;
  if (f.room !== undefined && d.room?.toLowerCase() !== f.room.toLowerCase()) return false;
  if (f.name !== undefined && !d.name?.toLowerCase().includes(f.name.toLowerCase())) return false;
  return f.tags === undefined || f.tags.every((t) => d.tags.includes(t));
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
  /** Called when devices held elsewhere change (presence, catalogs), or a device's name or room; returns the unsubscribe. */
  onChange(fn: () => void): () => void;
  /** What people call the device (name, room, tags), for tool descriptions; the fleet directory knows it. */
  describe?(deviceId: string): { name: string | null; room: string | null; tags: readonly string[] } | undefined;
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
  summary(deviceId: string): DevicePresence | undefined;
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

  constructor(
    private readonly local: LocalDevices,
    /** The lasting records: names and rooms for every device, and which offline devices are still known. */
    private readonly records?: DeviceRecords,
  ) {
    records?.onMetaChange(() => this.changed());
  }

  private changed(): void {
    for (const fn of this.listeners) fn();
  }

  describe(deviceId: string): { name: string | null; room: string | null; tags: readonly string[] } | undefined {
    const m = this.records?.getMeta(deviceId);
    return m && { name: m.name, room: m.room, tags: m.tags };
  }

  /** The cluster's part, once it has joined. */
  attach(remote: RemoteDevices): void {
    this.remote = remote;
    remote.onChange(() => this.changed());
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
    if (!this.remote || mine?.online) return mine;
    const theirs = this.remote.summary(deviceId);
    // An offline device forgotten (DELETE) since: its presence entry alone does not list it.
    if (!theirs || (!theirs.online && this.records?.wasForgotten(deviceId))) return mine;
    // Presence says when it connected; the record, when it was last heard from (written by its instance, throttled).
    const lastSeen = Math.max(Date.parse(theirs.lastSeenAt), this.records?.getFacts(deviceId)?.lastSeen ?? 0);
    return { ...theirs, lastSeenAt: new Date(lastSeen).toISOString(), ...recordFields(this.records, deviceId, theirs.connectedAt) };
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
