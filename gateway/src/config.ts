import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { z } from 'zod';
import { apiKeyFields, ConsoleSlice, HttpSlice, MetricsSlice } from './api/config.js';
import { AssistantSlice, withImpliedModel } from './assistant/config.js';
import { ClusterSlice } from './cluster/config.js';
import { jsonErrorWithoutInput, redactProblem, safePath, secretValues, unknownKeyProblems } from './config-errors.js';
import { always, declaredSettings, documented, env, isPlain, Ms } from './config/fields.js';
import { CallsSlice, DevicesSlice, SessionSlice } from './devices/config.js';
import { EnrollmentSlice } from './enrollment/config.js';
import { EventsSlice } from './events/config.js';
import { OtaSlice } from './firmware/config.js';
import { FleetSlice } from './fleet/config.js';
import { McpConfigError, McpSlice, resolveServers, type McpConfig } from './hub/config.js';
import { deviceAuthFields, FramesSlice, MqttSlice, WsSlice } from './links/config.js';
import { SchemasSlice } from './schemas/config.js';
import { ModelRequestsSlice } from './throttle/config.js';
import { TlsSlice } from './tls/config.js';
import { VisionSlice } from './vision/config.js';
import { VoiceSlice } from './voice/config.js';

export type { FirmwareRolloutConfig } from './firmware/config.js';

/**
 * The whole configuration, composed of the slices each folder owns (its schema, defaults, cross-field
 * rules and environment variables live in `<folder>/config.ts`). Sources, weakest first: the defaults, the
 * optional JSON file (`GATEWAY_CONFIG`, default `gateway.config.json`), then the environment variables
 * each field declares. Every object is strict: a misspelled key is refused, never ignored.
 */
export const ConfigSchema = z
  .strictObject({
    http: HttpSlice.prefault({}),
    ws: WsSlice.prefault({}),
    mqtt: MqttSlice.prefault({}),
    ...deviceAuthFields,
    ...apiKeyFields,
    dataDir: env(
      'GATEWAY_DATA_DIR',
      z.string().default('data'),
      'where generated secrets and the store (`voxgate.db`: enrollments) are kept; one gateway per data dir',
    ),
    logLevel: env(
      'GATEWAY_LOG_LEVEL',
      z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
      'pino level (`silent` … `trace`)',
    ),
    /** `json` lines for log collectors; `pretty` (pino-pretty) for people reading a terminal. */
    logFormat: env(
      'GATEWAY_LOG_FORMAT',
      z.enum(['json', 'pretty']).default('json'),
      '`json` lines for log collectors, or `pretty` (pino-pretty) for a person at a terminal',
    ),
    vision: VisionSlice.prefault({}),
    calls: CallsSlice.prefault({}),
    session: SessionSlice.prefault({}),
    devices: DevicesSlice.prefault({}),
    events: EventsSlice.prefault({}),
    frames: FramesSlice.prefault({}),
    schemas: SchemasSlice.prefault({}),
    ota: OtaSlice.prefault({}),
    shutdownGraceMs: documented(Ms(4000, 60_000), 'how long SIGINT/SIGTERM waits for connections to close'),
    metrics: MetricsSlice.prefault({}),
    console: ConsoleSlice.prefault({}),
    mcp: McpSlice.prefault({}),
    enrollment: EnrollmentSlice.prefault({}),
    assistant: AssistantSlice.prefault({}),
    voice: VoiceSlice.prefault({}),
    modelRequests: ModelRequestsSlice.prefault({}),
    tls: TlsSlice.prefault({}),
    cluster: ClusterSlice.prefault({}),
    fleet: FleetSlice.prefault({}),
  })
  // Rules across slices. They run even when other fields failed (`when`), so one start lists every
  // problem; the values they read may then be raw input, hence the type guards.
  .refine((c) => c.voice?.model === undefined || Object.hasOwn(c.assistant?.models ?? {}, c.voice.model), {
    path: ['voice', 'model'],
    message: 'voice.model must name one of assistant.models',
    when: always,
  })
  .refine((c) => !(c.deviceAuth === 'token' && Array.isArray(c.deviceTokens) && c.deviceTokens.length === 0), {
    path: ['deviceTokens'],
    message: 'deviceAuth "token" needs at least one token',
    when: always,
  })
  .refine((c) => !isPlain(c.apiKeyTenants) || !Array.isArray(c.apiKeys) || Object.keys(c.apiKeyTenants).every((k) => c.apiKeys.includes(k)), {
    path: ['apiKeyTenants'],
    message: 'names a key that is not in apiKeys',
    when: always,
  })
  .refine((c) => !(typeof c.http?.maxConnections === 'number' && typeof c.ws?.maxConnections === 'number' && c.http.maxConnections <= c.ws.maxConnections), {
    path: ['http', 'maxConnections'],
    message: 'must exceed ws.maxConnections: the difference is what the API and health checks keep when devices fill the port',
    when: always,
  });

type Parsed = z.infer<typeof ConfigSchema>;
/** The configuration as loadConfig returns it: `mcp.servers` checked, and merged with the servers file. */
export type Config = Omit<Parsed, 'mcp'> & {
  mcp: McpConfig;
  /** The JSON file the configuration was read from (absolute), for the startup summary; absent when there was none. */
  configFile?: string | undefined;
};
export type ConfigInput = z.input<typeof ConfigSchema>;

/** Environment variable -> config path, derived from the variables each field declares. */
export const ENV_MAP: Readonly<Record<string, readonly string[]>> = Object.fromEntries(
  declaredSettings(ConfigSchema).flatMap((s) => s.env.map((name) => [name, s.path] as const)),
);

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

/** Build the configuration; throws ConfigError listing every bad field with where it came from. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: ConfigInput = {}): Config {
  const file = env['GATEWAY_CONFIG'] ?? 'gateway.config.json';
  const fromFile = readConfigFile(file, env['GATEWAY_CONFIG'] !== undefined);
  const merged = deepMerge(deepMerge(fromFile ?? {}, envToObject(env)), overrides as Record<string, unknown>);
  const r = ConfigSchema.safeParse(merged);
  // No problem text ever carries a secret value (see config-errors.ts).
  const secrets = secretValues(merged);
  const fail = (problems: string[]) => new ConfigError(problems.map((p) => redactProblem(p, secrets)));
  if (r.success) {
    try {
      // The servers file is read once, here; the gateway gets the checked entries.
      return {
        ...r.data,
        assistant: withImpliedModel(r.data.assistant, env),
        mcp: { ...r.data.mcp, servers: resolveServers(r.data.mcp) },
        configFile: fromFile === undefined ? undefined : resolve(file),
      };
    } catch (e) {
      if (e instanceof McpConfigError) throw fail(e.problems);
      throw e;
    }
  }
  const origin = (path: PropertyKey[]) => {
    // The variable that set this path or a parent of it (an issue inside apiKeyTenants came from
    // GATEWAY_API_KEY_TENANTS); list indexes are not part of an env path (GATEWAY_OTA_ROLLOUT_PERCENT sets ota.rollout.0.percent).
    const key = path.filter((p) => typeof p !== 'number');
    const envName = Object.entries(ENV_MAP).find(([, p]) => p.join('.') === key.slice(0, p.length).join('.'))?.[0];
    return envName && env[envName] !== undefined ? ` (from ${envName})` : '';
  };
  throw fail(
    r.error.issues.flatMap((i) =>
      // Every object is strict: a misspelled key is an error (with a suggestion), never silently ignored.
      i.code === 'unrecognized_keys' ? unknownKeyProblems(ConfigSchema, i.path, i.keys) : [`${safePath(i.path, merged)}: ${i.message}${origin(i.path)}`],
    ),
  );
}

/** The file's settings; undefined when an optional file is missing. */
function readConfigFile(path: string, required: boolean): Record<string, unknown> | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    if (!required && (e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new ConfigError([`${path}: cannot read (${(e as Error).message})`]);
  }
  try {
    const v = JSON.parse(text) as unknown;
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('the top level must be an object');
    return v as Record<string, unknown>;
  } catch (e) {
    throw new ConfigError([`${path}: not valid JSON (${jsonErrorWithoutInput(e)})`]);
  }
}

function envToObject(env: NodeJS.ProcessEnv): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, path] of Object.entries(ENV_MAP)) {
    const v = env[name];
    if (v === undefined || v === '') continue;
    let node = out;
    for (const key of path.slice(0, -1)) node = (node[key] ??= {}) as Record<string, unknown>;
    node[path[path.length - 1]!] = v;
  }
  return out;
}

function deepMerge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k];
    out[k] = isPlain(prev) && isPlain(v) ? deepMerge(prev, v) : v;
  }
  return out;
}
