import { EVENT_TYPES } from '../events/bus.js';
import { z } from 'zod';

/** The HTTP wire types, defined once in zod; routes get OpenAPI 3.0 schemas from them (validation + docs). */
export function jsonSchema(schema: z.ZodType, io: 'input' | 'output' = 'input'): Record<string, unknown> {
  const { $schema: _drop, ...rest } = z.toJSONSchema(schema, { target: 'openapi-3.0', io, unrepresentable: 'any' }) as Record<string, unknown>;
  return rest;
}

export const Problem = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    code: z.string().describe('Stable machine-readable error code'),
    instance: z.string().optional(),
  })
  .loose();

export const DeviceIdParam = z.object({ deviceId: z.string().max(64).describe('MAC address: aa:bb:cc:dd:ee:ff, aa_bb_.., aa-bb-.. or aabbccddeeff') });
export const ToolParams = DeviceIdParam.extend({ toolName: z.string().min(1).max(128) });

const ServerInfo = z.object({ name: z.string(), version: z.string() }).nullable();
export const Device = z.object({
  id: z.string(),
  clientId: z.string(),
  transport: z.enum(['websocket', 'mqtt']),
  online: z.boolean(),
  state: z.string().describe('awaiting_hello | initializing | ready | failed | offline'),
  connectedAt: z.string(),
  lastSeenAt: z.string(),
  server: ServerInfo,
  protocolVersion: z.string().nullable(),
  firmwareVersion: z.string().nullable().describe("The device's firmware: its initialize serverInfo.version, else the version it reported to the OTA endpoint"),
  toolCount: z.number().int(),
  toolsHash: z.string().nullable(),
  pendingCalls: z.number().int(),
  catalogWarning: z
    .string()
    .optional()
    .describe(
      'Present when the catalog is incomplete: the device refused part of its tool list for good, or a byte bound (session.maxCatalogBytes, devices.catalogBudgetBytes) cut or refused it',
    ),
  name: z.string().nullable().describe('What people call it (PATCH /v1/devices/{id})'),
  room: z.string().nullable().describe('Where it is (PATCH /v1/devices/{id})'),
  tags: z.array(z.string()).describe('Tags people gave it (PATCH /v1/devices/{id})'),
  tenant: z.string().nullable().describe('The tenant the device belongs to (null: none yet; only operator keys see it)'),
  board: z.string().nullable().describe("Its board, as its last OTA check reported it (board.type, else board.name, else the User-Agent's product)"),
  firstSeenAt: z.string().describe('When it was first admitted (kept in the store across restarts)'),
});
export const DeviceList = z.object({
  devices: z.array(Device),
  nextCursor: z.string().optional().describe('Pass as `cursor` for the next page; absent on the last page'),
});
export const DEVICE_PAGE_DEFAULT = 100;
const FilterText = z.string().min(1).max(128);
export const DeviceListQuery = z.object({
  online: z.enum(['true', 'false']).optional().describe('Only online (true) or offline (false) devices'),
  transport: z.enum(['websocket', 'mqtt']).optional(),
  tag: z.array(FilterText).max(32).optional().describe('Only devices with every one of these tags (repeat the parameter, or separate with commas)'),
  room: FilterText.optional().describe('Only devices in this room (ignoring case)'),
  name: FilterText.optional().describe('Only devices whose name contains this (ignoring case)'),
  board: FilterText.optional().describe('Only devices of this board'),
  firmware: FilterText.optional().describe('Only devices on this firmware version'),
  limit: z.number().int().min(1).max(1000).optional().describe(`Devices per page (default ${DEVICE_PAGE_DEFAULT}, at most 1000)`),
  cursor: z.string().max(128).optional().describe("The previous page's nextCursor (opaque)"),
});

export const ToolOut = z.object({
  name: z.string(),
  description: z.string(),
  inputSchema: z.record(z.string(), z.unknown()),
  annotations: z.record(z.string(), z.unknown()).optional(),
  userOnly: z.boolean().describe('annotations.audience is ["user"]: for people, not for an LLM'),
});
export const ToolList = z.object({ tools: z.array(ToolOut), hash: z.string() });

const TimeoutMs = z.number().int().min(1).max(3_600_000).optional().describe('Per-call timeout; capped by calls.maxTimeoutMs');
export const CallBody = z
  .object({
    arguments: z.record(z.string(), z.unknown()).optional(),
    timeoutMs: TimeoutMs,
  })
  .strict();
export const CallResult = z.object({
  content: z.array(z.record(z.string(), z.unknown())),
  isError: z.boolean(),
  structuredContent: z.record(z.string(), z.unknown()).optional(),
  durationMs: z.number(),
});

export const RpcBody = z
  .object({
    method: z.string().min(1).max(256).describe('A `notifications/*` method is sent as a notification: 202, no result'),
    params: z.record(z.string(), z.unknown()).optional(),
    timeoutMs: TimeoutMs,
    // Listed so that a caller's own id is refused with a clear error rather than silently stripped.
    id: z.unknown().optional().describe('Not accepted: the gateway assigns ids (devices take small integers only)'),
  })
  .strict();
export const RpcResult = z.object({ result: z.unknown() });
export const RpcSent = z.object({ sent: z.literal(true), notification: z.string() });

export const EventsQuery = z.object({
  device: z.string().max(2048).optional().describe('Comma-separated device ids'),
  type: z
    .string()
    .max(512)
    .optional()
    .describe(`Comma-separated event types: ${EVENT_TYPES.join(', ')}`),
});
