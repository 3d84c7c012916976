import type { FastifyInstance, FastifyRequest, FastifySchema } from 'fastify';
import type { DeviceTenancy } from '../devices/tenants.js';
import { callerSees, NO_TENANTS } from './device-scope.js';
import { z } from 'zod';
import { GatewayError } from '../errors.js';
import type { QueuedCalls } from '../fleet/queued-calls.js';
import { CALL_STATES, publicCall, QueuedCallSchema } from '../fleet/types.js';
import { parseDeviceId, problems } from './route-helpers.js';
import { DeviceIdParam, jsonSchema } from './schemas.js';

export const QueuedCallOut = QueuedCallSchema.omit({ sentAt: true, tenant: true, principal: true });
export const QueuedCallBody = z
  .object({
    tool: z.string().min(1).max(128).describe("The device's tool name"),
    arguments: z.record(z.string(), z.unknown()).optional(),
    ttlMs: z
      .number()
      .int()
      .min(1)
      .max(30 * 86_400_000)
      .optional()
      .describe('How long the call waits for the device (default fleet.defaultTtlMs; capped by fleet.maxTtlMs)'),
  })
  .strict();
export const CallIdParam = z.object({ callId: z.string().min(1).max(64) });
export const PAGE_DEFAULT = 100;
export const PageQuery = {
  limit: z.number().int().min(1).max(1000).optional().describe(`Items per page (default ${PAGE_DEFAULT}, at most 1000)`),
  cursor: z.string().max(256).optional().describe("The previous page's nextCursor (opaque)"),
};
export const CallListQuery = z.object({ state: z.enum(CALL_STATES).optional(), ...PageQuery });
const CallList = z.object({ calls: z.array(QueuedCallOut), nextCursor: z.string().optional().describe('Absent on the last page') });

/** Queued calls: calls that wait for their device (offline, busy, or connected only for a voice session). */
export async function callRoutes(app: FastifyInstance, opts: { calls: QueuedCalls; tenancy?: DeviceTenancy | undefined }): Promise<void> {
  const tenancy = opts.tenancy ?? NO_TENANTS;
  /**
   * A call is there for an operator key (every call), and for a tenant's key only when a key of that tenant queued it
   * (its `tenant`) and its device is still that tenant's. Any other is not there (404), like another tenant's device:
   * a device moved from one tenant to another takes none of its old tenant's calls (their arguments, their results)
   * to the new one, nor leaves them to the old one; a call of an operator's key, or of a job, is no tenant's.
   */
  const visibleCall = (req: FastifyRequest, id: string) => {
    const c = opts.calls.get(id);
    const tenant = req.caller?.tenant;
    if (!c || !callerSees(req, tenancy, c.deviceId) || (tenant !== undefined && c.tenant !== tenant))
      throw new GatewayError('NOT_FOUND', `no queued call ${id}`);
    return c;
  };
  const { calls } = opts;
  const tags = ['calls'];

  app.post<{ Params: z.infer<typeof DeviceIdParam>; Body: z.infer<typeof QueuedCallBody> }>('/v1/devices/:deviceId/calls', {
    schema: {
      tags,
      summary: 'Queue a tool call for the device: answered at once (202); delivered in order when the device is ready, even after a restart',
      params: jsonSchema(DeviceIdParam),
      body: jsonSchema(QueuedCallBody),
      response: { 202: jsonSchema(QueuedCallOut, 'output'), ...problems(400, 401, 413, 429) },
    } as FastifySchema,
    handler: async (req, reply) => {
      const deviceId = parseDeviceId(req.params.deviceId);
      // The caller's tenant goes with the call: it runs only while the device is still that tenant's (call-delivery.ts),
      // and its key's principal: only while that key is still configured, with that tenant (fleet/key-grants.ts).
      const { tenant, principal } = req.caller ?? {};
      const c = await calls.enqueue({ deviceId, tool: req.body.tool, arguments: req.body.arguments ?? {}, ttlMs: req.body.ttlMs, tenant, principal });
      return reply.code(202).send(publicCall(c));
    },
  });

  app.get<{ Params: z.infer<typeof DeviceIdParam>; Querystring: z.infer<typeof CallListQuery> }>('/v1/devices/:deviceId/calls', {
    schema: {
      tags,
      summary: "The device's queued calls, oldest first (finished ones while they are retained); a tenant's key: those its tenant queued",
      params: jsonSchema(DeviceIdParam),
      querystring: jsonSchema(CallListQuery),
      response: { 200: jsonSchema(CallList, 'output'), ...problems(400, 401) },
    } as FastifySchema,
    handler: async (req) => {
      const deviceId = parseDeviceId(req.params.deviceId);
      const { state, limit, cursor } = req.query;
      const after = cursor === undefined ? undefined : decodeCursor(cursor);
      // A tenant's key: its tenant's calls only (the device is its own: the scope hook answered 404 otherwise).
      const page = calls.forDevice(deviceId, { state, limit: limit ?? PAGE_DEFAULT, after, tenant: req.caller?.tenant });
      return page.next === undefined ? { calls: page.calls.map(publicCall) } : { calls: page.calls.map(publicCall), nextCursor: encodeCursor(page.next) };
    },
  });

  app.get<{ Params: z.infer<typeof CallIdParam> }>('/v1/calls/:callId', {
    schema: {
      tags,
      summary: 'One queued call: its state, and its result or error once finished',
      params: jsonSchema(CallIdParam),
      response: { 200: jsonSchema(QueuedCallOut, 'output'), ...problems(400, 401, 404) },
    } as FastifySchema,
    handler: async (req) => publicCall(visibleCall(req, req.params.callId)),
  });

  app.delete<{ Params: z.infer<typeof CallIdParam> }>('/v1/calls/:callId', {
    schema: {
      tags,
      summary: 'Cancel a queued call (409 once it was sent or has finished)',
      params: jsonSchema(CallIdParam),
      response: { 200: jsonSchema(QueuedCallOut, 'output'), ...problems(400, 401, 404, 409) },
    } as FastifySchema,
    handler: async (req) => publicCall(await calls.cancel(visibleCall(req, req.params.callId).id)),
  });
}

/** A page cursor: the last id of the page, versioned and encoded so callers treat it as opaque. */
const CURSOR_PREFIX = 'q1:';
export function encodeCursor(afterId: string): string {
  return Buffer.from(CURSOR_PREFIX + afterId).toString('base64url');
}
export function decodeCursor(cursor: string): string {
  const text = /^[A-Za-z0-9_-]+$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const id = text.startsWith(CURSOR_PREFIX) ? text.slice(CURSOR_PREFIX.length) : '';
  if (!/^[a-z]+_[0-9a-z]{1,60}$/.test(id)) throw new GatewayError('INVALID_REQUEST', 'cursor is not one this API gave out; start again without it');
  return id;
}
