import { normalizeDeviceId } from '@voxgate/protocol';
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchema } from 'fastify';
import type { z } from 'zod';
import type { CallOutcome, DeviceHandle } from '../devices/device-handle.js';
import type { DeviceDirectory, DeviceFilter, DeviceSummary } from '../devices/directory.js';
import { GatewayError } from '../errors.js';
import {
  CallBody,
  CallResult,
  DEVICE_PAGE_DEFAULT,
  Device,
  DeviceIdParam,
  DeviceList,
  DeviceListQuery,
  RpcBody,
  RpcResult,
  RpcSent,
  ToolList,
  ToolParams,
  jsonSchema,
} from './schemas.js';
import type { DeviceTenancy } from '../devices/tenants.js';
import { plainCallResultJson } from './call-result-json.js';
import { callerDirectory, NO_TENANTS } from './device-scope.js';
import { parseDeviceId, problems } from './route-helpers.js';

/** Devices, their tools, and calls to them. */
export interface DeviceRouteOptions {
  registry: DeviceDirectory;
  firmwareVersion?: (deviceId: string) => string | undefined;
  /** Devices' tenants: what a tenant's key may see (absent: no device has a tenant). */
  tenancy?: DeviceTenancy;
}

// eslint-disable-next-line max-lines-per-function -- a route table: each route's schema is declarative data, its handler a few lines
export async function deviceRoutes(app: FastifyInstance, opts: DeviceRouteOptions): Promise<void> {
  const tenancy = opts.tenancy ?? NO_TENANTS;
  // Every route reads devices through the caller's tenant: another tenant's device is not there (404).
  const devicesOf = (req: FastifyRequest) => callerDirectory(req, opts.registry, tenancy);
  // The device's own initialize answer is authenticated; the OTA report (an open endpoint) only fills in.
  const withFirmware = ({ firmware, ...d }: DeviceSummary) => ({
    ...d,
    firmwareVersion: d.server?.version ?? opts.firmwareVersion?.(d.id) ?? firmware,
    tenant: tenancy.tenantOf(d.id) ?? null,
  });
  const tags = ['devices'];

  app.get<{ Querystring: z.infer<typeof DeviceListQuery> }>('/v1/devices', {
    schema: {
      tags,
      summary: 'List the known devices (kept in the store across restarts), online or not, in pages ordered by id; filters combine (all must match)',
      querystring: jsonSchema(DeviceListQuery),
      response: { 200: jsonSchema(DeviceList, 'output'), ...problems(400, 401) },
    } as FastifySchema,
    handler: async (req) => {
      const { limit, cursor } = req.query;
      const filter = listFilter(req.query);
      const page = devicesOf(req).page(filter, { limit: limit ?? DEVICE_PAGE_DEFAULT, after: cursor === undefined ? undefined : decodeCursor(cursor) });
      return page.next === undefined
        ? { devices: page.devices.map(withFirmware) }
        : { devices: page.devices.map(withFirmware), nextCursor: encodeCursor(page.next) };
    },
  });

  app.get<{ Params: z.infer<typeof DeviceIdParam> }>('/v1/devices/:deviceId', {
    schema: {
      tags,
      summary: 'One device',
      params: jsonSchema(DeviceIdParam),
      response: { 200: jsonSchema(Device, 'output'), ...problems(400, 401, 404) },
    } as FastifySchema,
    handler: async (req) => {
      const id = parseDeviceId(req.params.deviceId);
      const d = devicesOf(req).get(id);
      if (!d) throw new GatewayError('DEVICE_NOT_FOUND', `no device ${id} has ever connected`);
      return withFirmware(d);
    },
  });

  app.get<{ Params: z.infer<typeof DeviceIdParam> }>('/v1/devices/:deviceId/tools', {
    schema: {
      tags,
      summary: "The device's tool catalog (user-only tools flagged)",
      params: jsonSchema(DeviceIdParam),
      response: { 200: jsonSchema(ToolList, 'output'), ...problems(400, 401, 404, 502, 503, 504) },
    } as FastifySchema,
    handler: async (req) => {
      const session = devicesOf(req).device(parseDeviceId(req.params.deviceId));
      const catalog = session.catalog;
      if (!catalog) throw notReady(session);
      return { tools: catalog.tools, hash: catalog.hash };
    },
  });

  app.post<{ Params: z.infer<typeof ToolParams>; Body: z.infer<typeof CallBody> }>('/v1/devices/:deviceId/tools/:toolName/call', {
    schema: {
      tags,
      summary: 'Call a tool on the device and wait for its result',
      params: jsonSchema(ToolParams),
      body: jsonSchema(CallBody),
      response: { 200: jsonSchema(CallResult, 'output'), ...problems(400, 401, 404, 422, 429, 502, 503, 504) },
    },
    // Its first step reads the device through the caller's tenant (404 for another tenant's): no scope hook runs.
    config: { scopesItsDevice: true },
    // Not async, and a local device's call in callback form: no promise per request (a throw here is fastify's
    // 4xx/5xx as before; a device held by another instance answers through its promise).
    handler: (req, reply) => {
      const session = devicesOf(req).device(parseDeviceId(req.params.deviceId));
      const body = req.body ?? {};
      const done = (out: CallOutcome) => sendCallResult(reply, out);
      const failed = (err: unknown) => void reply.send(err instanceof Error ? err : new Error(String(err)));
      const opts = callOpts(body.timeoutMs);
      if (session.callThen) session.callThen(req.params.toolName, body.arguments ?? {}, opts, done, failed);
      else void session.call(req.params.toolName, body.arguments ?? {}, opts).then(done, failed);
    },
  });

  app.post<{ Params: z.infer<typeof DeviceIdParam>; Body: z.infer<typeof RpcBody> }>('/v1/devices/:deviceId/rpc', {
    schema: {
      tags,
      summary: 'Send a raw JSON-RPC request to the device (for engineers)',
      params: jsonSchema(DeviceIdParam),
      body: jsonSchema(RpcBody),
      response: { 200: jsonSchema(RpcResult, 'output'), 202: jsonSchema(RpcSent, 'output'), ...problems(400, 401, 404, 429, 502, 503, 504) },
    },
    handler: async (req, reply) => {
      const { method, params, timeoutMs } = req.body;
      if (req.body.id !== undefined)
        throw new GatewayError(
          'INVALID_REQUEST',
          'remove "id": the gateway assigns JSON-RPC ids to match the reply (devices accept small integers only); send "method" and "params"',
        );
      const session = devicesOf(req).device(parseDeviceId(req.params.deviceId));
      if (method.startsWith('notifications/')) {
        session.notify(method, params);
        return reply.code(202).send({ sent: true, notification: method });
      }
      return { result: await session.rpc(method, params, callOpts(timeoutMs)) };
    },
  });
}

/** The listing's filters from its query (`tag` may repeat and hold commas: every tag must match). */
function listFilter(q: z.infer<typeof DeviceListQuery>): DeviceFilter {
  const tags = q.tag
    ?.flatMap((t) => t.split(','))
    .map((t) => t.trim())
    .filter(Boolean);
  return {
    ...(q.online ? { online: q.online === 'true' } : {}),
    ...(q.transport ? { transport: q.transport } : {}),
    ...(tags?.length ? { tags } : {}),
    ...(q.room !== undefined ? { room: q.room } : {}),
    ...(q.name !== undefined ? { name: q.name } : {}),
    ...(q.board !== undefined ? { board: q.board } : {}),
    ...(q.firmware !== undefined ? { firmware: q.firmware } : {}),
  };
}

/** A page cursor: the last device id of the page, versioned and encoded so callers treat it as opaque. */
const CURSOR_PREFIX = 'd1:';
function encodeCursor(afterId: string): string {
  return Buffer.from(CURSOR_PREFIX + afterId).toString('base64url');
}
function decodeCursor(cursor: string): string {
  const text = /^[A-Za-z0-9_-]+$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const id = text.startsWith(CURSOR_PREFIX) ? normalizeDeviceId(text.slice(CURSOR_PREFIX.length)) : undefined;
  if (!id) throw new GatewayError('INVALID_REQUEST', 'cursor is not one this API gave out; start again without it');
  return id;
}

/** An online device without a catalog yet: say what setup is doing (never "offline": it is connected). */
function notReady(session: DeviceHandle): GatewayError {
  if (session.state === 'failed')
    return new GatewayError('DEVICE_ERROR', `device ${session.deviceId} did not complete initialization: ${session.initError}`, { state: 'failed' });
  const s = session.setup;
  if (!s)
    return new GatewayError('DEVICE_NOT_READY', `device ${session.deviceId} is online and initializing (${session.state}); try again shortly`, {
      state: session.state,
    });
  return new GatewayError(
    'DEVICE_NOT_READY',
    `device ${session.deviceId} is online; setup step ${s.step} is being retried (attempt ${s.attempt}: ${s.lastError})`,
    {
      state: 'retrying',
      step: s.step,
      attempt: s.attempt,
      retryInMs: Math.max(0, s.retryAt - Date.now()),
    },
  );
}

/** A call's result: the usual (text) one written as JSON at once, anything else through the response schema. */
function sendCallResult(reply: FastifyReply, out: CallOutcome): void {
  const json = plainCallResultJson(out);
  if (json === undefined) void reply.send({ ...out, isError: out.isError ?? false });
  else void reply.type('application/json; charset=utf-8').send(json);
}

/** A call's options: one shared object when the caller sets no timeout (the usual case), none made per request. */
const NO_CALL_OPTS: { timeoutMs?: number } = Object.freeze({});
function callOpts(timeoutMs: number | undefined): { timeoutMs?: number } {
  return timeoutMs === undefined ? NO_CALL_OPTS : { timeoutMs };
}
