import { isIP } from 'node:net';
import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os';
import { join, resolve } from 'node:path';
import { providerEndpoint } from './assistant/assistant.js';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import type { MqttLink } from './links/mqtt.js';
import { GATEWAY_VERSION } from './version.js';

/**
 * What a person needs right after `npm start`: where to open the console, the OTA URL to put into a
 * device (an address a device can reach, not `localhost`), which files were read, which assistant
 * models are set up, and where the API key is kept (never the key: main.ts prints a generated one once).
 */
export interface StartupSummary {
  /** The console's URLs (none when `console.enabled` is false). */
  console: string[];
  /** The OTA URL for a device's settings, one per address the gateway is reachable on. */
  ota: string[];
  /** The JSON configuration file read, absolute; null when there was none (defaults and GATEWAY_* only). */
  configFile: string | null;
  /** The MCP servers file (`mcp.configFile`), when set. */
  mcpServersFile?: string;
  models: Array<{ name: string; provider: string; model: string; endpoint?: string; default: boolean }>;
  /** Where the API keys come from: GATEWAY_API_KEYS, or the secrets file (absolute path). */
  apiKeys: string;
  /** Reasons the URLs above may not work from a device. */
  warnings: string[];
}

type Interfaces = NodeJS.Dict<NetworkInterfaceInfo[]>;

export function startupSummary(config: Config, o: { httpPort: number; tls: boolean; interfaces?: Interfaces }): StartupSummary {
  const { bases, warnings } = reachableBases(config, o.httpPort, o.tls, o.interfaces ?? networkInterfaces());
  const models = Object.entries(config.assistant.models);
  const defaultModel = config.assistant.defaultModel ?? models[0]?.[0];
  const summary: StartupSummary = {
    console: config.console.enabled ? bases.map((b) => new URL('/console/', b).href) : [],
    ota: bases.map((b) => new URL('/xiaozhi/ota/', b).href),
    configFile: config.configFile ?? null,
    models: models.map(([name, m]) => {
      const endpoint = providerEndpoint(m.baseUrl);
      return { name, provider: m.provider, model: m.model, ...(endpoint ? { endpoint } : {}), default: name === defaultModel };
    }),
    apiKeys: config.apiKeys.length > 0 ? 'GATEWAY_API_KEYS' : join(resolve(config.dataDir), 'secrets.json'),
    warnings,
  };
  if (config.mcp.configFile) summary.mcpServersFile = resolve(config.mcp.configFile);
  return summary;
}

/**
 * Base URLs a device (and a person on the LAN) can use: `http.publicUrl` when set; for a wildcard listen
 * address, this host's non-loopback IPv4 addresses; else the listen address itself.
 */
function reachableBases(config: Config, port: number, tls: boolean, interfaces: Interfaces): { bases: string[]; warnings: string[] } {
  if (config.http.publicUrl) return { bases: [config.http.publicUrl], warnings: [] };
  const scheme = tls ? 'https' : 'http';
  const base = (host: string) => `${scheme}://${isIP(host) === 6 ? `[${host}]` : host}:${port}/`;
  const host = config.http.host;
  if (host === '0.0.0.0' || host === '::' || host === '') {
    const lan = lanAddresses(interfaces);
    if (lan.length > 0) return { bases: lan.map(base), warnings: [] };
    return { bases: [base('127.0.0.1')], warnings: ['no LAN IPv4 address found on this host: a device needs an address it can reach (or set http.publicUrl)'] };
  }
  const warnings = isLoopback(host) ? [`listening on ${host} only: devices and other machines cannot reach it (set GATEWAY_HTTP_HOST=0.0.0.0)`] : [];
  return { bases: [base(host)], warnings };
}

/** Non-internal IPv4 addresses, without link-local ones (169.254/16: no DHCP answer, not a LAN a device joins). */
export function lanAddresses(interfaces: Interfaces = networkInterfaces()): string[] {
  return Object.values(interfaces)
    .flatMap((list) => list ?? [])
    .filter((a) => a.family === 'IPv4' && !a.internal && !a.address.startsWith('169.254.'))
    .map((a) => a.address);
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.');
}

/** The summary as lines for a person (pretty logs): what to open, what to put into a device, what was read. */
export function summaryText(s: StartupSummary, listening: Record<string, string | boolean>): string {
  const lines: string[] = [];
  const row = (label: string, values: string[]) => values.forEach((v, i) => lines.push(`  ${(i === 0 ? label : '').padEnd(13)}${v}`));
  row('Listening', [
    Object.entries(listening)
      .map(([k, v]) => `${k} ${String(v)}`)
      .join(', '),
  ]);
  if (s.console.length) row('Console', s.console);
  row(
    'OTA URL',
    s.ota.map((u, i) => (i === 0 ? `${u}   (put this into a device's settings)` : u)),
  );
  row('Config file', [s.configFile ?? 'none (defaults and GATEWAY_* variables)']);
  if (s.mcpServersFile) row('MCP servers', [s.mcpServersFile]);
  row(
    'Models',
    s.models.length
      ? s.models.map((m) => `${m.name}: ${m.provider} ${m.model}${m.endpoint ? ` at ${m.endpoint}` : ''}${m.default ? ' (default)' : ''}`)
      : ['none: the assistant and /v1/chat/completions need one (assistant.models, docs/assistant.md)'],
  );
  row('API key', [s.apiKeys === 'GATEWAY_API_KEYS' ? 'from GATEWAY_API_KEYS' : `kept in ${s.apiKeys}`]);
  for (const w of s.warnings) lines.push(`  ! ${w}`);
  return lines.join('\n');
}

/** One block on start: the ports (as before), then where to go and what was read (startup-summary.ts). */
export function logStarted(config: Config, log: Logger, http: FastifyInstance, mqtt: MqttLink | undefined, tls: boolean): void {
  const address = http.server.address();
  const httpPort = typeof address === 'object' && address ? address.port : config.http.port;
  const summary = startupSummary(config, { httpPort, tls });
  const ports = {
    http: `${config.http.host}:${httpPort}`,
    ...(tls ? { tls: true } : {}),
    mqtt: mqtt ? `${config.mqtt.host}:${mqtt.port}` : 'disabled',
    ...(mqtt?.tlsPort !== undefined ? { mqttTls: `${config.mqtt.host}:${mqtt.tlsPort}` } : {}),
    deviceAuth: config.deviceAuth,
  };
  // Pretty logs are read by a person: the summary as aligned lines under the message, not as fields.
  if (config.logFormat === 'pretty') log.info(`voxgate started (version ${GATEWAY_VERSION})\n${summaryText(summary, ports)}`);
  else log.info({ ...ports, version: GATEWAY_VERSION, ...summary }, 'voxgate started');
}

/** Below this an API key is warned about at start (the generated ones have 36). */
const MIN_API_KEY_CHARS = 20;

/** What the start warns of before anything opens: a secrets file others could read, short API keys, open device auth. */
export function warnAtStart(
  config: Pick<Config, 'dataDir' | 'deviceAuth'>,
  secrets: { tightenedFrom?: string | undefined; apiKeys: readonly string[] },
  log: Logger,
): void {
  if (secrets.tightenedFrom)
    log.warn(
      { file: `${config.dataDir}/secrets.json`, previousMode: secrets.tightenedFrom },
      'the secrets file was readable by group or others; its mode is now 0600',
    );
  // A short key is guessable, and its fingerprint (stored with the work it queued) can be searched offline.
  const weakKeys = secrets.apiKeys.filter((k) => k.length < MIN_API_KEY_CHARS).length;
  if (weakKeys > 0)
    log.warn(
      { keys: weakKeys, minChars: MIN_API_KEY_CHARS },
      `${weakKeys} API key(s) shorter than ${MIN_API_KEY_CHARS} characters: use long random keys (e.g. openssl rand -base64 24)`,
    );
  if (config.deviceAuth === 'open') log.warn('device auth is "open": any device may connect. Set GATEWAY_DEVICE_AUTH=hmac (or token) in production.');
}
