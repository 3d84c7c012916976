import type { DeviceTenancy } from '../devices/tenants.js';
import { operatorOnly } from './device-scope.js';
import type { FastifyInstance, FastifySchema } from 'fastify';
import { z } from 'zod';
import { GatewayError } from '../errors.js';
import type { Jobs } from '../fleet/jobs.js';
import { CALL_STATES, CallErrorSchema, CallResultSchema, JobFilterSchema, JobOutSchema, publicJob, type JobFilter } from '../fleet/types.js';
import type { QueuedCalls } from '../fleet/queued-calls.js';
import { callRoutes, decodeCursor, encodeCursor, PAGE_DEFAULT, PageQuery } from './calls.js';
import { parseDeviceId, problems } from './route-helpers.js';
import { jsonSchema } from './schemas.js';

export const JobBody = z
  .object({
    tool: z.string().min(1).max(128).describe("The devices' tool name"),
    arguments: z.record(z.string(), z.unknown()).optional(),
    filter: JobFilterSchema.describe('Which devices: every field given must match (tags: all of them); at least one field'),
    concurrency: z.number().int().min(1).max(10_000).optional().describe('Calls of this job sent at once (default 10)'),
    ratePerSecond: z.number().min(0.001).max(10_000).optional().describe('Calls of this job started per second at most'),
    abortOverPercent: z.number().min(0).max(100).optional().describe('Abort (cancel the queued calls) once more than this % of the finished calls failed'),
    ttlMs: z
      .number()
      .int()
      .min(1)
      .max(30 * 86_400_000)
      .optional()
      .describe('How long each call waits for its device'),
  })
  .strict();
export type JobBodyInput = z.infer<typeof JobBody>;
const JobIdParam = z.object({ jobId: z.string().min(1).max(64) });
const JobListQuery = z.object(PageQuery);
const JobList = z.object({ jobs: z.array(JobOutSchema), nextCursor: z.string().optional() });
const JobDevicesQuery = z.object({ state: z.enum(CALL_STATES).optional(), ...PageQuery });
const JobDevices = z.object({
  devices: z.array(
    z.object({ deviceId: z.string(), callId: z.string(), state: z.enum(CALL_STATES), result: CallResultSchema.optional(), error: CallErrorSchema.optional() }),
  ),
  nextCursor: z.string().optional(),
});

/** The body of POST /v1/jobs made into what `Jobs.create` takes: ids normalized, an empty filter refused. */
export function jobRequest(body: JobBodyInput) {
  const f: JobFilter = { ...body.filter };
  if (f.ids) f.ids = f.ids.map(parseDeviceId);
  if (Object.values(f).every((v) => v === undefined))
    throw new GatewayError('INVALID_REQUEST', 'filter needs at least one of tags, room, firmware, board, ids');
  return {
    tool: body.tool,
    arguments: body.arguments ?? {},
    filter: f,
    concurrency: body.concurrency ?? 10,
    ratePerSecond: body.ratePerSecond,
    abortOverPercent: body.abortOverPercent,
    ttlMs: body.ttlMs,
  };
}

/** Queued calls and fleet jobs, mounted together. */
export async function fleetRoutes(app: FastifyInstance, opts: { calls: QueuedCalls; jobs: Jobs; tenancy?: DeviceTenancy | undefined }): Promise<void> {
  await app.register(callRoutes, { calls: opts.calls, tenancy: opts.tenancy });
  await app.register(async (scope) => {
    operatorOnly(scope, 'fleet jobs');
    await scope.register(jobRoutes, { jobs: opts.jobs });
  });
}

/** Fleet jobs: one tool call on every device a filter selects, with rollout controls. */
export async function jobRoutes(app: FastifyInstance, opts: { jobs: Jobs }): Promise<void> {
  const { jobs } = opts;
  const tags = ['jobs'];
  const find = (id: string) => {
    const j = jobs.get(id);
    if (!j) throw new GatewayError('NOT_FOUND', `no job ${id}`);
    return j;
  };

  app.post<{ Body: JobBodyInput }>('/v1/jobs', {
    schema: {
      tags,
      summary: 'Start a job: one queued call per selected device (offline ones wait); answered at once (202)',
      body: jsonSchema(JobBody),
      response: { 202: jsonSchema(JobOutSchema, 'output'), ...problems(400, 401, 413, 429) },
    } as FastifySchema,
    // The caller's key goes with the job: it sends calls only while that key is still configured (fleet/key-grants.ts).
    handler: async (req, reply) => reply.code(202).send(publicJob(await jobs.create({ ...jobRequest(req.body), principal: req.caller?.principal }))),
  });

  app.get<{ Querystring: z.infer<typeof JobListQuery> }>('/v1/jobs', {
    schema: {
      tags,
      summary: 'Jobs, newest first',
      querystring: jsonSchema(JobListQuery),
      response: { 200: jsonSchema(JobList, 'output'), ...problems(400, 401) },
    } as FastifySchema,
    handler: async (req) => {
      const page = jobs.list({ limit: req.query.limit ?? PAGE_DEFAULT, after: req.query.cursor === undefined ? undefined : decodeCursor(req.query.cursor) });
      const list = page.jobs.map(publicJob);
      return page.next === undefined ? { jobs: list } : { jobs: list, nextCursor: encodeCursor(page.next) };
    },
  });

  app.get<{ Params: z.infer<typeof JobIdParam> }>('/v1/jobs/:jobId', {
    schema: {
      tags,
      summary: 'One job: its state and counts of its calls by state',
      params: jsonSchema(JobIdParam),
      response: { 200: jsonSchema(JobOutSchema, 'output'), ...problems(400, 401, 404) },
    } as FastifySchema,
    handler: async (req) => publicJob(find(req.params.jobId)),
  });

  app.get<{ Params: z.infer<typeof JobIdParam>; Querystring: z.infer<typeof JobDevicesQuery> }>('/v1/jobs/:jobId/devices', {
    schema: {
      tags,
      summary: "The job's per-device calls and their results, in pages",
      params: jsonSchema(JobIdParam),
      querystring: jsonSchema(JobDevicesQuery),
      response: { 200: jsonSchema(JobDevices, 'output'), ...problems(400, 401, 404) },
    } as FastifySchema,
    handler: async (req) => {
      find(req.params.jobId);
      const { state, limit, cursor } = req.query;
      const page = jobs.devices(req.params.jobId, { state, limit: limit ?? PAGE_DEFAULT, after: cursor === undefined ? undefined : decodeCursor(cursor) });
      const devices = page.calls.map((c) => ({
        deviceId: c.deviceId,
        callId: c.id,
        state: c.state,
        ...(c.result ? { result: c.result } : {}),
        ...(c.error ? { error: c.error } : {}),
      }));
      return page.next === undefined ? { devices } : { devices, nextCursor: encodeCursor(page.next) };
    },
  });

  app.post<{ Params: z.infer<typeof JobIdParam> }>('/v1/jobs/:jobId/cancel', {
    schema: {
      tags,
      summary: 'Cancel a job: its queued calls are cancelled (calls already sent finish); a finished job is answered as it is',
      params: jsonSchema(JobIdParam),
      response: { 200: jsonSchema(JobOutSchema, 'output'), ...problems(400, 401, 404) },
    } as FastifySchema,
    handler: async (req) => publicJob(await jobs.cancel(req.params.jobId)),
  });
}
