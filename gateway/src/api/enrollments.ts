import type { FastifyInstance, FastifyRequest, FastifySchema } from 'fastify';
import { z } from 'zod';
import { Tenant, TENANT_PATTERN } from '../config/fields.js';
import type { DeviceTenants } from '../devices/tenants.js';
import type { Enrollment } from '../enrollment/enrollment.js';
import { canSee } from '../principal.js';
import type { Binding, Claim } from '../enrollment/records.js';
import type { ClaimPlace } from '../enrollment/claims.js';
import { GatewayError } from '../errors.js';
import { parseDeviceId, problems } from './route-helpers.js';
import { DeviceIdParam, jsonSchema } from './schemas.js';

const PendingEnrollment = z.object({
  code: z.string().describe('The 6-digit code the device shows and speaks'),
  deviceId: z.string(),
  clientId: z.string(),
  status: z.enum(['pending', 'rejected']),
  createdAt: z.string(),
  expiresAt: z.string(),
  remoteAddress: z.string(),
  userAgent: z.string().optional(),
  firmwareVersion: z.string().optional(),
});
const EnrollmentList = z.object({
  enrollments: z.array(PendingEnrollment),
  nextCursor: z.string().optional().describe('Pass as `cursor` for the following page; absent on the last page'),
});
const PAGE_MAX = 1000;
const EnrollmentListQuery = z.object({
  limit: z
    .number()
    .int()
    .min(1)
    .max(PAGE_MAX)
    .optional()
    .describe(`Pending enrollments per page (default and most ${PAGE_MAX}: enrollment.maxPending's default fits one page)`),
  cursor: z.string().max(64).optional().describe("The previous page's nextCursor (opaque)"),
  device: z.string().max(64).optional().describe("Only this device id's codes (any MAC spelling): a device's page in the console"),
});
const EnrolledDevice = z.object({
  deviceId: z.string(),
  clientId: z.string(),
  via: z.enum(['open', 'approve', 'allowlist']),
  enrolledAt: z.string(),
  delivered: z.boolean().describe('The device has collected its credentials from the OTA endpoint'),
  tenant: z.string().nullable().describe('The tenant the device belongs to (null: none; only operator keys see it)'),
});
const RefusedDevice = z.object({
  deviceId: z.string(),
  clientId: z.string(),
  transport: z.enum(['websocket', 'mqtt']),
  reason: z.string().describe('Why: missing_token, missing_credentials, bad_signature, bad_password, expired, takeover_refused, ...'),
  count: z.number().int().describe('Refusals since first seen (or since this instance started)'),
  firstAt: z.string(),
  lastAt: z.string(),
  remoteAddress: z.string(),
});
const RefusedList = z.object({ refused: z.array(RefusedDevice) });
const CodeParam = z.object({
  code: z
    .string()
    .regex(/^\d{6}$/)
    .describe('The code the device shows'),
});
const Reenrolled = z.object({ deviceId: z.string(), revoked: z.boolean() });
const ApproveBody = z.object({ tenant: Tenant.optional() }).strict();
/** Written out: the body is optional (no body at all is an approval without a tenant). */
const APPROVE_BODY_JSON = {
  type: 'object',
  nullable: true,
  properties: {
    tenant: {
      type: 'string',
      pattern: TENANT_PATTERN.source,
      description: "The tenant the device joins (operator keys; a tenant's key may only name its own)",
    },
  },
  additionalProperties: false,
};

/** What the routes need of device tenancy (devices/tenants.ts). */
export type EnrollmentTenants = Pick<DeviceTenants, 'tenantOf' | 'ruleFor' | 'set'>;
/** The client id a device the gateway has recorded connects with (undefined: not recorded). */
type ConnectsAs = (deviceId: string) => string | undefined;
const NO_TENANTS: EnrollmentTenants = { tenantOf: () => undefined, ruleFor: () => undefined, set: async () => undefined };

/**
 * Who sees what here (principal.ts canSee): operator keys (no tenant) see every enrollment. A tenant's key
 * sees a device's enrollment, and a pending request, only when the device is already its tenant's (a
 * re-enrollment) or `enrollment.tenantRules` give the request to its tenant; everything else waits for an
 * operator. Whatever a tenant may not see answers 404, as if it did not exist.
 */
function claimTenant(t: EnrollmentTenants, c: Claim, connectsAs?: ConnectsAs, rules?: WeakMap<Claim, string | null>): string | undefined {
  const own = t.tenantOf(c.deviceId);
  if (own !== undefined) return own;
  // A device the gateway has recorded counts for a rule only under the client id it connects with (as at an OTA check,
  // red team 7): a claim's client id and board are its sender's word, and anyone may send a check naming a known id.
  const recorded = connectsAs?.(c.deviceId);
  if (recorded !== undefined && recorded !== c.clientId) return undefined;
  if (!rules) return t.ruleFor({ deviceId: c.deviceId, clientId: c.clientId, board: c.board });
  // What the rules say of a claim never changes (the rules are configuration, a claim's facts are its own): asked once.
  let byRule = rules.get(c);
  if (byRule === undefined) rules.set(c, (byRule = t.ruleFor({ deviceId: c.deviceId, clientId: c.clientId, board: c.board }) ?? null));
  return byRule ?? undefined;
}

/** The tenant an approval gives the device: a tenant's key gives its own; an operator names one, or the device keeps its own or gets the rules'. */
function approvedTenant(
  req: FastifyRequest,
  t: EnrollmentTenants,
  connectsAs: ConnectsAs | undefined,
  claim: Claim | undefined,
  asked: string | undefined,
): string | undefined {
  const mine = req.caller?.tenant;
  if (mine === undefined) return asked ?? (claim ? claimTenant(t, claim, connectsAs) : undefined);
  if (asked !== undefined && asked !== mine) throw new GatewayError('FORBIDDEN', `an API key of tenant "${mine}" approves devices for that tenant only`);
  return mine;
}

/** Operators decide which devices join: pending activation codes, approve or reject, re-enroll. */
/** The enrollment checks of one gateway, each through principal.ts canSee. */
function scoped(tenants: EnrollmentTenants, connectsAs: ConnectsAs | undefined, need: () => Enrollment) {
  const rules = new WeakMap<Claim, string | null>();
  const seesClaim = (req: FastifyRequest, c: Claim) => canSee(req.caller ?? {}, claimTenant(tenants, c, connectsAs, rules));
  return {
    seesDevice: (req: FastifyRequest, deviceId: string) => canSee(req.caller ?? {}, tenants.tenantOf(deviceId)),
    seesClaim,
    /** The pending claim behind a code, when this caller may see it (operators: whatever enrollment says). */
    claimFor: (req: FastifyRequest, code: string): Claim | undefined => {
      const claim = need().pendingClaim(code);
      if (req.caller?.tenant !== undefined && (!claim || !seesClaim(req, claim)))
        throw new GatewayError('ENROLLMENT_NOT_FOUND', `no pending enrollment has code ${code}`);
      return claim;
    },
    view: (b: Binding) => ({ ...bindingView(b), tenant: tenants.tenantOf(b.deviceId) ?? null }),
  };
}

// eslint-disable-next-line max-lines-per-function -- a route table: each route's schema is declarative data, its handler a few lines
export async function enrollmentRoutes(
  app: FastifyInstance,
  opts: {
    enrollment: Enrollment | undefined;
    tenants?: EnrollmentTenants | undefined;
    /** The client id a recorded device connects with: a claim for it under another client id gets no rule's tenant. */
    connectsAs?: ConnectsAs | undefined;
  },
): Promise<void> {
  const tags = ['enrollment'];
  const tenants = opts.tenants ?? NO_TENANTS;
  const need = (): Enrollment => {
    if (!opts.enrollment) throw new GatewayError('ENROLLMENT_NOT_FOUND', 'device auth is "open": devices need no enrollment');
    return opts.enrollment;
  };
  const { seesDevice, seesClaim, claimFor, view } = scoped(tenants, opts.connectsAs, need);

  app.get<{ Querystring: z.infer<typeof EnrollmentListQuery> }>('/v1/enrollments', {
    schema: {
      tags,
      summary: 'Devices waiting for approval, oldest first, in pages',
      querystring: jsonSchema(EnrollmentListQuery),
      response: { 200: jsonSchema(EnrollmentList, 'output'), ...problems(400, 401) },
    } as FastifySchema,
    handler: async (req) => {
      const after = req.query.cursor === undefined ? undefined : decodeCursor(req.query.cursor);
      if (!opts.enrollment) return { enrollments: [] };
      // A tenant's key: only the claims it may see fill its page (operators: every claim).
      const sees = req.caller?.tenant === undefined ? undefined : (c: Claim) => seesClaim(req, c);
      const deviceId = req.query.device === undefined ? undefined : parseDeviceId(req.query.device);
      const page = opts.enrollment.pendingPage({ after, limit: req.query.limit ?? PAGE_MAX, deviceId, ...(sees ? { sees } : {}) });
      const last = page.claims.at(-1);
      const enrollments = page.claims.map(claimView);
      return page.more && last ? { enrollments, nextCursor: encodeCursor(last) } : { enrollments };
    },
  });

  app.get('/v1/enrollments/refused', {
    schema: {
      tags,
      summary:
        'Devices refused at connect for lack of valid credentials, most recent first (256 ids, this instance; past that the source address holding the most gives up its oldest)',
      description: 'A fleet moved from open to hmac shows here: those devices need credentials from an OTA check (see docs/security.md).',
      response: { 200: jsonSchema(RefusedList, 'output'), ...problems(401) },
    } as FastifySchema,
    handler: async (req) => ({
      refused: (opts.enrollment?.refused.list() ?? [])
        .filter((d) => seesDevice(req, d.deviceId))
        .map((d) => ({ ...d, firstAt: new Date(d.firstAt).toISOString(), lastAt: new Date(d.lastAt).toISOString() })),
    }),
  });

  app.post<{ Params: z.infer<typeof CodeParam>; Body: z.infer<typeof ApproveBody> | null }>('/v1/enrollments/:code/approve', {
    schema: {
      tags,
      summary: 'Approve the device showing this code: its next OTA check receives its credentials',
      description: "A tenant's key approves for its own tenant (a different `tenant` is 403); an operator key may name the device's tenant.",
      params: jsonSchema(CodeParam),
      body: APPROVE_BODY_JSON,
      response: { 200: jsonSchema(EnrolledDevice, 'output'), ...problems(400, 401, 403, 404) },
    } as FastifySchema,
    handler: async (req) => {
      const asked = ApproveBody.parse(req.body ?? {}).tenant;
      const claim = claimFor(req, req.params.code);
      const tenant = approvedTenant(req, tenants, opts.connectsAs, claim, asked);
      const b = await need().approve(req.params.code);
      if (tenant !== undefined && tenants.tenantOf(b.deviceId) !== tenant) await tenants.set(b.deviceId, tenant);
      return view(b);
    },
  });

  app.post<{ Params: z.infer<typeof CodeParam> }>('/v1/enrollments/:code/reject', {
    schema: {
      tags,
      summary: 'Reject the device showing this code (until its code expires)',
      params: jsonSchema(CodeParam),
      response: { 200: jsonSchema(PendingEnrollment, 'output'), ...problems(400, 401, 404) },
    } as FastifySchema,
    handler: async (req) => {
      claimFor(req, req.params.code);
      return claimView(await need().reject(req.params.code));
    },
  });

  app.get<{ Params: z.infer<typeof DeviceIdParam> }>('/v1/enrollments/devices/:deviceId', {
    schema: {
      tags,
      summary: "A device's enrollment",
      params: jsonSchema(DeviceIdParam),
      response: { 200: jsonSchema(EnrolledDevice, 'output'), ...problems(400, 401, 404) },
    } as FastifySchema,
    handler: async (req) => {
      const id = parseDeviceId(req.params.deviceId);
      const b = need().binding(id);
      if (!b || !seesDevice(req, id)) throw new GatewayError('ENROLLMENT_NOT_FOUND', `device ${id} is not enrolled`);
      return view(b);
    },
  });

  app.post<{ Params: z.infer<typeof DeviceIdParam> }>('/v1/enrollments/devices/:deviceId/reenroll', {
    schema: {
      tags,
      summary: "Revoke the device's credentials and close its connection; its next OTA check enrolls it again under the policy",
      params: jsonSchema(DeviceIdParam),
      response: { 200: jsonSchema(Reenrolled, 'output'), ...problems(400, 401, 404) },
    } as FastifySchema,
    handler: async (req) => {
      const id = parseDeviceId(req.params.deviceId);
      if (!seesDevice(req, id) || !(await need().reenroll(id))) throw new GatewayError('ENROLLMENT_NOT_FOUND', `device ${id} is not enrolled`);
      return { deviceId: id, revoked: true };
    },
  });
}

/** A page cursor: the place of the page's last claim (its creation time and code), versioned and encoded: opaque to callers. */
const CURSOR = /^e1:([0-9.e+-]{1,32}):(\d{6})$/;
function encodeCursor(c: Claim): string {
  return Buffer.from(`e1:${c.createdAt}:${c.code}`).toString('base64url');
}
function decodeCursor(cursor: string): ClaimPlace {
  const m = CURSOR.exec(/^[A-Za-z0-9_-]+$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : '');
  const createdAt = Number(m?.[1]);
  if (!m || !Number.isFinite(createdAt)) throw new GatewayError('INVALID_REQUEST', 'cursor is not one this API gave out; start again without it');
  return { createdAt, code: m[2]! };
}

function claimView(c: Claim): z.infer<typeof PendingEnrollment> {
  return {
    code: c.code,
    deviceId: c.deviceId,
    clientId: c.clientId,
    status: c.status,
    createdAt: new Date(c.createdAt).toISOString(),
    expiresAt: new Date(c.expiresAt).toISOString(),
    remoteAddress: c.remoteAddress,
    ...(c.userAgent ? { userAgent: c.userAgent } : {}),
    ...(c.firmwareVersion ? { firmwareVersion: c.firmwareVersion } : {}),
  };
}

function bindingView(b: Binding): Omit<z.infer<typeof EnrolledDevice>, 'tenant'> {
  return { deviceId: b.deviceId, clientId: b.clientId, via: b.via, enrolledAt: b.enrolledAt, delivered: b.delivered };
}
