import type { FastifyInstance, FastifySchema } from 'fastify';
import { z } from 'zod';
import type { Enrollment } from '../enrollment/enrollment.js';
import type { Binding, Claim } from '../enrollment/records.js';
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
const EnrollmentList = z.object({ enrollments: z.array(PendingEnrollment) });
const EnrolledDevice = z.object({
  deviceId: z.string(),
  clientId: z.string(),
  via: z.enum(['open', 'approve', 'allowlist']),
  enrolledAt: z.string(),
  delivered: z.boolean().describe('The device has collected its credentials from the OTA endpoint'),
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
const CodeParam = z.object({ code: z.string().regex(/^\d{6}$/).describe('The code the device shows') });
const Reenrolled = z.object({ deviceId: z.string(), revoked: z.boolean() });

/** Operators decide which devices join: pending activation codes, approve or reject, re-enroll. */
export async function enrollmentRoutes(app: FastifyInstance, opts: { enrollment: Enrollment | undefined }): Promise<void> {
  const tags = ['enrollment'];
  const need = (): Enrollment => {
    if (!opts.enrollment) throw new GatewayError('ENROLLMENT_NOT_FOUND', 'device auth is "open": devices need no enrollment');
    return opts.enrollment;
  };

  app.get('/v1/enrollments', {
    schema: { tags, summary: 'Devices waiting for approval, oldest first', response: { 200: jsonSchema(EnrollmentList, 'output'), ...problems(401) } } as FastifySchema,
    handler: async () => ({ enrollments: (opts.enrollment?.pending() ?? []).map(claimView) }),
  });

  app.get('/v1/enrollments/refused', {
    schema: {
      tags,
      summary: 'Devices refused at connect for lack of valid credentials, most recent first (the last 256 ids, this instance)',
      description: 'A fleet moved from open to hmac shows here: those devices need credentials from an OTA check (see docs/security.md).',
      response: { 200: jsonSchema(RefusedList, 'output'), ...problems(401) },
    } as FastifySchema,
    handler: async () => ({
      refused: (opts.enrollment?.refused.list() ?? []).map((d) => ({ ...d, firstAt: new Date(d.firstAt).toISOString(), lastAt: new Date(d.lastAt).toISOString() })),
    }),
  });

  app.post<{ Params: z.infer<typeof CodeParam> }>('/v1/enrollments/:code/approve', {
    schema: {
      tags,
      summary: 'Approve the device showing this code: its next OTA check receives its credentials',
      params: jsonSchema(CodeParam),
      response: { 200: jsonSchema(EnrolledDevice, 'output'), ...problems(400, 401, 404) },
    } as FastifySchema,
    handler: async (req) => bindingView(await need().approve(req.params.code)),
  });

  app.post<{ Params: z.infer<typeof CodeParam> }>('/v1/enrollments/:code/reject', {
    schema: {
      tags,
      summary: 'Reject the device showing this code (until its code expires)',
      params: jsonSchema(CodeParam),
      response: { 200: jsonSchema(PendingEnrollment, 'output'), ...problems(400, 401, 404) },
    } as FastifySchema,
    handler: async (req) => claimView(await need().reject(req.params.code)),
  });

  app.get<{ Params: z.infer<typeof DeviceIdParam> }>('/v1/enrollments/devices/:deviceId', {
    schema: { tags, summary: "A device's enrollment", params: jsonSchema(DeviceIdParam), response: { 200: jsonSchema(EnrolledDevice, 'output'), ...problems(400, 401, 404) } } as FastifySchema,
    handler: async (req) => {
      const id = parseDeviceId(req.params.deviceId);
      const b = need().binding(id);
      if (!b) throw new GatewayError('ENROLLMENT_NOT_FOUND', `device ${id} is not enrolled`);
      return bindingView(b);
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
      if (!(await need().reenroll(id))) throw new GatewayError('ENROLLMENT_NOT_FOUND', `device ${id} is not enrolled`);
      return { deviceId: id, revoked: true };
    },
  });
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

function bindingView(b: Binding): z.infer<typeof EnrolledDevice> {
  return { deviceId: b.deviceId, clientId: b.clientId, via: b.via, enrolledAt: b.enrolledAt, delivered: b.delivered };
}
