/**
 * The device-facing OTA routes and the enrollment API as parts: enrollment over a SQLite store in a temp
 * dir, a firmware service without images, both route plugins mounted as buildApi mounts them. No gateway,
 * no device links.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { enrollmentRoutes } from '../../gateway/src/api/enrollments.js';
import { otaRoutes } from '../../gateway/src/api/ota.js';
import { ConfigSchema, type ConfigInput } from '../../gateway/src/config.js';
import { openEnrollment } from '../../gateway/src/enrollment/open.js';
import { FirmwareService } from '../../gateway/src/firmware/service.js';
import { createMetrics } from '../../gateway/src/metrics.js';
import { SqliteStore } from '../../gateway/src/store/sqlite-store.js';
import { apiPart, bearer } from './api-parts.js';

export const OTA_PART_SECRET = 'ota-device-secret-0123456789';

export interface OtaPart {
  app: FastifyInstance;
  /** A device's request, from host gw.local:8000 unless `headers` say otherwise. */
  post(url: string, body: string, headers: Record<string, string>): Promise<PartAnswer>;
  /** An API call with the part's key (`key: null`: none). */
  api(method: 'GET' | 'POST', url: string, body?: unknown, key?: string | null): Promise<PartAnswer>;
  metrics: ReturnType<typeof createMetrics>;
  logs: Array<Record<string, unknown>>;
  /** Close the app and the store (the data dir stays until the test ends). */
  close(): Promise<void>;
}

export interface PartAnswer {
  status: number;
  type: string;
  headers: Record<string, string | string[] | number | undefined>;
  body: Record<string, unknown>;
}

const closers: Array<() => unknown> = [];

/** Close every part opened since the last call and remove their data dirs (an afterEach). */
export async function closeOtaParts(): Promise<void> {
  for (const f of closers.splice(0).reverse()) await f();
}

/** A temp data dir removed by closeOtaParts. */
export function otaDataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'voxgate-ota-'));
  closers.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** hmac device auth by default; `dataDir` to reopen what an earlier part wrote. */
export async function otaPart(input: ConfigInput = {}, dataDir = otaDataDir()): Promise<OtaPart> {
  const config = ConfigSchema.parse({ deviceAuth: 'hmac', deviceSecret: OTA_PART_SECRET, ...input });
  const store = new SqliteStore(join(dataDir, 'voxgate.db'));
  const logs: Array<Record<string, unknown>> = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
  const metrics = createMetrics();
  const enrollment = await openEnrollment(
    { deviceSecret: OTA_PART_SECRET, mqttGroup: config.mqtt.group, store, log, metrics, onRevoked: () => undefined },
    config.enrollment,
  );
  const firmware = new FirmwareService({ settings: config.ota, imagesDir: join(dataDir, 'firmware'), log, metrics });
  const ota = { settings: config, deviceSecret: OTA_PART_SECRET, mqttPort: () => 1883, mqttTlsPort: () => undefined, firmware, metrics, enrollment };
  const app = await apiPart(
    async (scope) => {
      await scope.register(enrollmentRoutes, { enrollment });
      scope.get('/v1/devices', async () => ({ devices: [] }));
    },
    { open: (a) => a.register(otaRoutes, ota), fastify: { loggerInstance: log } },
  );
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await app.close();
    await store.close();
  };
  closers.push(close);
  const answer = (r: Awaited<ReturnType<FastifyInstance['inject']>>): PartAnswer => ({
    status: r.statusCode,
    type: String(r.headers['content-type']),
    headers: r.headers,
    body: r.body ? r.json<Record<string, unknown>>() : {},
  });
  return {
    app,
    metrics,
    logs,
    close,
    post: async (url, body, headers) => answer(await app.inject({ method: 'POST', url, headers: { host: 'gw.local:8000', ...headers }, payload: body })),
    api: async (method, url, body, key) =>
      answer(
        await app.inject({
          method,
          url,
          headers: key === null ? {} : bearer(key),
          ...(body === undefined ? {} : { payload: body as Record<string, unknown> }),
        }),
      ),
  };
}
