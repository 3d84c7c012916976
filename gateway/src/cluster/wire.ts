import { normalizeDeviceId } from '@voxgate/protocol';
import { z } from 'zod';
import { TENANT_PATTERN } from '../config/fields.js';
import { ERROR_CODES } from '../errors.js';
import { EVENT_TYPES } from '../events/bus.js';

/**
 * What instances tell each other over NATS. Every message from the bus is parsed with these schemas:
 * another instance (or anything else that can publish on the account) is not trusted to be well-formed.
 */

const DeviceId = z
  .string()
  .max(64)
  .transform((s, ctx) => normalizeDeviceId(s) ?? (ctx.addIssue({ code: 'custom', message: 'not a device id' }), z.NEVER));
const InstanceId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/);
const Hash = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/);

/** A device's presence entry: which instance holds it, and how far its setup got. The KV revision is its cluster-wide epoch. */
export const PresenceEntry = z.object({
  instance: InstanceId,
  state: z.enum(['online', 'ready', 'offline']),
  transport: z.enum(['websocket', 'mqtt']),
  clientId: z.string().max(256),
  catalogHash: Hash.optional(),
  toolCount: z.number().int().min(0).max(100_000).default(0),
  server: z.object({ name: z.string().max(256), version: z.string().max(256) }).optional(),
  connectedAt: z.string().max(64),
});
export type PresenceEntry = z.infer<typeof PresenceEntry>;

/** A catalog stored once per hash (one copy per firmware). */
export const StoredCatalog = z.object({
  tools: z
    .array(
      z.object({
        name: z.string().min(1).max(256),
        description: z.string().max(65_536),
        inputSchema: z.record(z.string(), z.unknown()),
        annotations: z.record(z.string(), z.unknown()).optional(),
        userOnly: z.boolean(),
      }),
    )
    .max(10_000),
});

/** A call forwarded to the instance that holds the device. */
export const ForwardedCall = z.discriminatedUnion('op', [
  z.object({
    op: z.literal('call'),
    deviceId: DeviceId,
    name: z.string().min(1).max(256),
    args: z.record(z.string(), z.unknown()),
    timeoutMs: z.number().int().min(1).max(86_400_000).optional(),
  }),
  z.object({
    op: z.literal('rpc'),
    deviceId: DeviceId,
    name: z.string().min(1).max(256),
    args: z.record(z.string(), z.unknown()).optional(),
    timeoutMs: z.number().int().min(1).max(86_400_000).optional(),
  }),
  z.object({ op: z.literal('notify'), deviceId: DeviceId, name: z.string().min(1).max(256), args: z.record(z.string(), z.unknown()).optional() }),
  // Is anyone still listening on this instance's subject? (An older instance answers INVALID_REQUEST: also alive.)
  z.object({ op: z.literal('ping') }),
]);
export type ForwardedCall = z.infer<typeof ForwardedCall>;

const ErrorCodeSchema = z.enum(ERROR_CODES);
/** The owner's answer: the result, or the error with the code the caller would have got from it directly. */
export const ForwardedReply = z.union([
  z.object({ ok: z.literal(true), result: z.unknown() }),
  z.object({ ok: z.literal(false), code: ErrorCodeSchema, message: z.string().max(4096), extra: z.record(z.string(), z.unknown()).default({}) }),
]);
export type ForwardedReply = z.infer<typeof ForwardedReply>;

/** An event as it travels between instances on `voxgate.events.<deviceId>.<type>`. */
export const RelayedEvent = z.object({
  origin: InstanceId,
  type: z.enum(EVENT_TYPES),
  deviceId: DeviceId,
  data: z.record(z.string(), z.unknown()),
  /** The origin's event id (`<boot>-<n>`) and time: every instance serves the event under this id. */
  id: z
    .string()
    .regex(/^[0-9a-z]{1,32}-\d{1,15}$/)
    .optional(),
  at: z.string().max(64).optional(),
  /** The tenant the event was published under (null: none); absent from instances from before 2026-11-30. */
  tenant: z.string().regex(TENANT_PATTERN).nullable().optional(),
});
export type RelayedEvent = z.infer<typeof RelayedEvent>;

/** KV keys allow `[-/_=.A-Za-z0-9]`: a MAC's colons become underscores. */
export const presenceKey = (deviceId: string): string => `dev.${deviceId.replaceAll(':', '_')}`;
export const deviceOfKey = (key: string): string | undefined => (key.startsWith('dev.') ? normalizeDeviceId(key.slice(4)) : undefined);
export const catalogKey = (hash: string): string => `cat.${hash}`;
export const instanceKey = (instance: string): string => `inst.${instance}`;
export const callSubject = (instance: string): string => `voxgate.call.${instance}`;
export const eventSubject = (deviceId: string, type: string): string => `voxgate.events.${deviceId}.${type}`;
export const EVENTS_WILDCARD = 'voxgate.events.>';
