import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { loadConfig, startGateway, type ConfigInput, type EventType, type Gateway, type GatewayEvent } from '../../gateway/src/index.js';
import { createLogger } from '../../gateway/src/log.js';
import type { ConverseKit } from '../../gateway/src/voice/converse/converse.js';

export const TEST_API_KEY = 'test-api-key-0123456789';

export interface ApiResponse<T = Record<string, unknown>> {
  status: number;
  headers: Headers;
  body: T;
}

export interface TestGateway {
  gw: Gateway;
  baseUrl: string;
  wsUrl: string;
  mqttUrl: string;
  /** Every log line the gateway wrote, parsed. */
  logs: Array<Record<string, unknown>>;
  api<T = Record<string, unknown>>(method: string, path: string, body?: unknown, opts?: { apiKey?: string | null }): Promise<ApiResponse<T>>;
  /** The value of a Prometheus counter/gauge (summed over labels matching `labels`). */
  metric(name: string, labels?: Record<string, string>): Promise<number>;
  /** The next bus event of this type (for this device); subscribe before causing it. */
  nextEvent(type: EventType, deviceId?: string, timeoutMs?: number): Promise<GatewayEvent>;
  close(): Promise<void>;
}

/** A real gateway on 127.0.0.1, ports chosen by the OS, its own data dir, logs captured in memory. */
export async function startTestGateway(
  overrides: ConfigInput = {},
  env: NodeJS.ProcessEnv = {},
  opts: { converseKit?: () => ConverseKit; dataDir?: string } = {},
): Promise<TestGateway> {
  // A data dir the test passes in is the test's: a second gateway on it is a restart, and close() leaves it.
  const ownDir = opts.dataDir === undefined;
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'voxgate-test-'));
  // An empty config file of its own, so a developer's gateway.config.json never leaks into a test.
  writeFileSync(join(dataDir, 'gateway.config.json'), '{}');
  const logs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString().split('\n')) if (line) logs.push(JSON.parse(line) as Record<string, unknown>);
      cb();
    },
  });
  let gw: Gateway;
  try {
    const config = loadConfig(
      { GATEWAY_CONFIG: join(dataDir, 'gateway.config.json'), ...env },
      {
        dataDir,
        apiKeys: [TEST_API_KEY],
        ...overrides,
        http: { host: '127.0.0.1', port: 0, ...overrides.http },
        mqtt: { host: '127.0.0.1', port: 0, ...overrides.mqtt },
        voice: { ...overrides.voice, udp: { host: '127.0.0.1', port: 0, ...overrides.voice?.udp } },
        tls: { mqttPort: 0, ...overrides.tls },
      },
    );
    gw = await startGateway(config, { log: createLogger('debug', sink), ...(opts.converseKit ? { converseKit: opts.converseKit } : {}) });
  } catch (e) {
    // Tests that expect a start to fail leave no data dir behind either.
    if (ownDir) rmSync(dataDir, { recursive: true, force: true });
    throw e;
  }
  const baseUrl = `http://127.0.0.1:${gw.httpPort}`;
  const api = async <T>(method: string, path: string, body?: unknown, opts: { apiKey?: string | null } = {}): Promise<ApiResponse<T>> => {
    const headers: Record<string, string> = {};
    const key = opts.apiKey === undefined ? TEST_API_KEY : opts.apiKey;
    if (key) headers['authorization'] = `Bearer ${key}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(baseUrl + path, { method, headers, body: body === undefined ? null : JSON.stringify(body) });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : {}) as T };
  };
  return {
    gw,
    baseUrl,
    wsUrl: `ws://127.0.0.1:${gw.httpPort}/xiaozhi/v1/`,
    mqttUrl: `mqtt://127.0.0.1:${gw.mqttPort ?? 0}`,
    logs,
    api,
    async metric(name, labels = {}) {
      // /metrics needs a key (an API key works); with metrics.port set it is on a listener of its own.
      const metricsUrl = gw.metricsPort === undefined ? `${baseUrl}/metrics` : `http://127.0.0.1:${gw.metricsPort}/metrics`;
      const text = await (await fetch(metricsUrl, { headers: { authorization: `Bearer ${TEST_API_KEY}` } })).text();
      let sum = 0;
      for (const line of text.split('\n')) {
        const m = /^([a-z_]+)(\{[^}]*\})? (\S+)$/.exec(line);
        if (!m || m[1] !== name) continue;
        const ok = Object.entries(labels).every(([k, v]) => (m[2] ?? '').includes(`${k}="${v}"`));
        if (ok) sum += Number(m[3]);
      }
      return sum;
    },
    nextEvent(type, deviceId, timeoutMs = 10_000) {
      return new Promise<GatewayEvent>((resolve, reject) => {
        const timer = setTimeout(() => {
          off();
          reject(new Error(`no ${type} event${deviceId ? ` for ${deviceId}` : ''} within ${timeoutMs} ms`));
        }, timeoutMs);
        const off = gw.bus.subscribe((e) => {
          if (e.type !== type || (deviceId !== undefined && e.deviceId !== deviceId)) return;
          clearTimeout(timer);
          off();
          resolve(e);
        });
      });
    },
    async close() {
      await gw.close();
      if (ownDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
