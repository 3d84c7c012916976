/**
 * The device records' shapes and limits: what is stored (records.ts keeps it; the API validates edits against the same
 * limits), and what the registry reports to the records.
 */
import { z } from 'zod';

/**
 * What the gateway learned from a device, one document per device id: written by the instance that holds
 * the device (at connect, when ready, last seen at most once per `lastSeenWriteMs`, and at disconnect).
 */
export const DEVICE_FACTS_COLLECTION = 'devices';
/**
 * What people gave a device (name, room, tags, tenant), one document per device id: written only by
 * `PATCH /v1/devices/{id}`, so a last-seen write on one instance never overwrites a rename on another.
 */
export const DEVICE_META_COLLECTION = 'device-meta';

export const MAX_NAME = 64;
export const MAX_ROOM = 64;
export const MAX_TAGS = 32;
export const MAX_TAG = 32;
export const TAG_PATTERN = /^[A-Za-z0-9_.:-]+$/;

const Transport = z.enum(['websocket', 'mqtt']);
// The shared store is read back as untrusted: bounded strings, or the document is skipped.
export const StoredFacts = z.object({
  clientId: z.string().max(128),
  transport: Transport,
  board: z.string().max(128).nullable().catch(null),
  firmware: z.string().max(128).nullable().catch(null),
  firstSeen: z.number().int().nonnegative(),
  lastSeen: z.number().int().nonnegative(),
  connectedAt: z.number().int().nonnegative(),
  catalogHash: z.string().max(64).nullable().catch(null),
  toolCount: z.number().int().nonnegative().catch(0),
  server: z
    .object({ name: z.string().max(256), version: z.string().max(256) })
    .nullable()
    .catch(null),
});
export type DeviceFacts = z.infer<typeof StoredFacts>;

const Tag = z.string().min(1).max(MAX_TAG).regex(TAG_PATTERN);
export const StoredMeta = z.object({
  name: z.string().max(MAX_NAME).nullable().catch(null),
  room: z.string().max(MAX_ROOM).nullable().catch(null),
  tags: z.array(Tag).max(MAX_TAGS).catch([]),
  tenant: z.string().max(128).nullable().catch(null),
});
export type DeviceMeta = z.infer<typeof StoredMeta>;

/**
 * The part of the store (store/store.ts) the records use, as a port: devices/ does not import store/.
 * `onChange` is there with a shared store (the cluster's KV bucket).
 */
export interface RecordStore {
  put(collection: string, key: string, value: unknown): Promise<void>;
  /** `durable: false`: the batch may skip a sync to disk of its own (store/store.ts). */
  putMany?(collection: string, entries: ReadonlyArray<{ key: string; value: unknown }>, opts?: { durable?: boolean }): Promise<void>;
  delete(collection: string, key: string): Promise<boolean>;
  list(collection: string): Promise<Array<{ key: string; value: unknown }>>;
  onChange?(collection: string, fn: (change: { key: string; value: unknown }) => void): () => void;
}

export const NO_META: Readonly<DeviceMeta> = Object.freeze({ name: null, room: null, tags: [], tenant: null });

/** What the registry reports when a device connects. */
export interface Admission {
  clientId: string;
  transport: 'websocket' | 'mqtt';
  at: number;
}

/** What the registry reports when a device's catalog is loaded. */
export interface Readiness {
  catalogHash: string;
  toolCount: number;
  server: { name: string; version: string } | undefined;
}

/** A live device as the last-seen sweep reads it: a field write per frame, nothing more (see session.ts). */
export interface SeenDevice {
  readonly deviceId: string;
  readonly lastSeenAt: number;
}

/** The server's name and version within the stored bounds: the same (shared) object when they already are. */
export function boundedServer(s: { name: string; version: string }): { name: string; version: string } {
  return s.name.length <= 256 && s.version.length <= 256 ? s : { name: s.name.slice(0, 256), version: s.version.slice(0, 256) };
}

export function sameServer(a: DeviceFacts['server'], b: DeviceFacts['server']): boolean {
  return a === b || (a !== null && b !== null && a.name === b.name && a.version === b.version);
}
