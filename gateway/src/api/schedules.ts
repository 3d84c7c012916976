import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { GatewayError } from '../errors.js';
import { MAX_CRON_LENGTH } from '../fleet/schedules-timing.js';
import type { Scheduler } from '../fleet/schedules.js';
import { JobBody } from './jobs.js';
import { problems } from './route-helpers.js';
import { jsonSchema } from './schemas.js';

const Args = z.record(z.string(), z.unknown());

const CallTarget = z
  .object({
    device: z.string().max(64).describe('Device id (MAC)'),
    tool: z.string().min(1).max(128),
    arguments: Args.optional(),
  })
  .strict();

export const ScheduleBody = z
  .object({
    cron: z
      .string()
      .min(1)
      .max(MAX_CRON_LENGTH)
      .optional()
      .describe('Five fields (minute hour day-of-month month day-of-week) or @hourly, @daily, ...; at most once a minute'),
    timeZone: z.string().min(1).max(64).optional().describe('IANA time zone the cron is read in (default UTC)'),
    at: z.string().min(1).max(64).optional().describe('One run at this ISO 8601 time with an offset, e.g. 2027-01-23T08:00:00Z'),
    call: CallTarget.optional().describe('One tool on one device (exactly one of call and job)'),
    job: JobBody.optional().describe('A fleet job, as POST /v1/jobs (checked again when it fires)'),
  })
  .strict();

const ScheduleOut = z.object({
  id: z.string(),
  cron: z.string().optional(),
  timeZone: z.string().optional(),
  at: z.string().optional(),
  call: z.object({ device: z.string(), tool: z.string(), arguments: Args.optional() }).optional(),
  job: Args.optional(),
  paused: z.boolean(),
  nextRun: z.string().nullable().describe('Null once a one-off has run, while paused, or when the cron never matches again'),
  lastRun: z.string().nullable().describe('The time of the last run handled (fired or skipped)'),
  lastResult: z
    .object({
      callId: z.string().optional(),
      jobId: z.string().optional(),
      error: z.object({ code: z.string(), message: z.string() }).optional().describe('The call or job could not be started'),
      skipped: z.boolean().optional().describe('Missed by more than the grace window (the gateway was down): not run'),
    })
    .optional(),
  createdAt: z.string(),
});

const IdParam = z.object({ id: z.string().min(1).max(64) });
const PatchBody = z.object({ paused: z.boolean() }).strict();

/** A body the route's schema let through, read with zod (an absent body is a 400, never a 500). */
function bodyOf<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const r = schema.safeParse(body);
  if (!r.success) throw new GatewayError('INVALID_REQUEST', `body: ${z.prettifyError(r.error).slice(0, 500)}`);
  return r.data;
}

/** A tenant's key sees and changes its tenant's schedules only. */
const tenantOf = (req: FastifyRequest) => req.caller?.tenant;

export async function scheduleRoutes(app: FastifyInstance, o: { scheduler: Scheduler }): Promise<void> {
  const { scheduler } = o;
  const tags = ['schedules'];
  const out = jsonSchema(ScheduleOut, 'output');

  app.post<{ Body: z.infer<typeof ScheduleBody> }>('/v1/schedules', {
    schema: {
      tags,
      summary: 'Start a call or a job on a cron (in a time zone) or once (at); missed runs follow the rule in docs/fleet.md',
      body: jsonSchema(ScheduleBody),
      response: { 201: out, ...problems(400, 401) },
    },
    handler: async (req, reply) => {
      return reply.code(201).send(await scheduler.create(bodyOf(ScheduleBody, req.body), req.caller));
    },
  });

  app.get('/v1/schedules', {
    schema: {
      tags,
      summary: 'Every schedule with its next run',
      response: { 200: jsonSchema(z.object({ schedules: z.array(ScheduleOut) }), 'output'), ...problems(401) },
    },
    handler: async (req) => ({ schedules: scheduler.list(tenantOf(req)) }),
  });

  app.get<{ Params: z.infer<typeof IdParam> }>('/v1/schedules/:id', {
    schema: { tags, summary: 'One schedule', params: jsonSchema(IdParam), response: { 200: out, ...problems(401, 404) } },
    handler: async (req) => scheduler.get(req.params.id, tenantOf(req)),
  });

  app.patch<{ Params: z.infer<typeof IdParam>; Body: z.infer<typeof PatchBody> }>('/v1/schedules/:id', {
    schema: {
      tags,
      summary: 'Pause or resume a schedule (a resumed cron starts again at its next run after now)',
      params: jsonSchema(IdParam),
      body: jsonSchema(PatchBody),
      response: { 200: out, ...problems(400, 401, 404) },
    },
    handler: async (req) => scheduler.setPaused(req.params.id, bodyOf(PatchBody, req.body).paused, tenantOf(req)),
  });

  app.delete<{ Params: z.infer<typeof IdParam> }>('/v1/schedules/:id', {
    schema: {
      tags,
      summary: 'Delete a schedule (a call or job it started goes on)',
      params: jsonSchema(IdParam),
      response: { 204: { type: 'null', description: 'Deleted' }, ...problems(401, 404) },
    },
    handler: async (req, reply) => {
      await scheduler.delete(req.params.id, tenantOf(req));
      return reply.code(204).send();
    },
  });
}
