/**
 * What every bench gateway starts with: loopback ports, one API key, its own data directory, quiet logs; and the
 * one IPC question-and-answer helper the tools that fork the gateway with a probe use.
 */
import type { ChildProcess } from 'node:child_process';
import { freePort } from './procs.js';

export interface GatewayEnvOptions {
  dataDir: string;
  apiKey: string;
  /** The config file (GATEWAY_CONFIG); none when omitted. */
  configFile?: string;
  httpPort?: number;
  mqttPort?: number;
}

export interface GatewayEnv {
  env: Record<string, string>;
  httpPort: number;
  mqttPort: number;
}

export async function gatewayEnv(o: GatewayEnvOptions): Promise<GatewayEnv> {
  const httpPort = o.httpPort ?? (await freePort());
  const mqttPort = o.mqttPort ?? (await freePort());
  const env: Record<string, string> = {
    GATEWAY_HTTP_HOST: '127.0.0.1',
    GATEWAY_HTTP_PORT: String(httpPort),
    GATEWAY_MQTT_HOST: '127.0.0.1',
    GATEWAY_MQTT_PORT: String(mqttPort),
    GATEWAY_API_KEYS: o.apiKey,
    GATEWAY_DATA_DIR: o.dataDir,
    GATEWAY_LOG_LEVEL: 'warn',
  };
  if (o.configFile) env['GATEWAY_CONFIG'] = o.configFile;
  return { env, httpPort, mqttPort };
}

/**
 * Caps for a fleet that connects from loopback (one or a few source addresses) and may fill the descriptor
 * budget: the per-source and device caps lifted to it, the API's reserve kept.
 */
export function fleetCaps(devices: number): Record<string, string> {
  return {
    GATEWAY_WS_MAX_CONNECTIONS: String(devices + 100),
    GATEWAY_HTTP_MAX_CONNECTIONS: String(devices + 300),
    GATEWAY_HTTP_MAX_CONNECTIONS_PER_ADDRESS: String(devices + 300),
    GATEWAY_MQTT_MAX_CONNECTIONS: String(Math.max(8000, devices + 100)),
    GATEWAY_MQTT_MAX_CONNECTIONS_PER_ADDRESS: String(devices + 100),
  };
}

/** Asks a forked child over IPC and resolves with its answer carrying the same `id`. */
export function ipcAsk(child: ChildProcess): <T>(cmd: Record<string, unknown>) => Promise<T> {
  let nextId = 1;
  return <T>(cmd: Record<string, unknown>) =>
    new Promise<T>((resolve) => {
      const id = nextId++;
      const on = (m: { id: number }) => {
        if (m.id !== id) return;
        child.off('message', on);
        resolve(m as T);
      };
      child.on('message', on);
      child.send({ ...cmd, id });
    });
}

/** The gateway's environment for relayed voice to `upstreamUrl` (the voice server double), UDP audio on loopback. */
export function voiceRelayEnv(upstreamUrl: string): Record<string, string> {
  return {
    GATEWAY_VOICE_MODE: 'relay',
    GATEWAY_VOICE_UPSTREAM_URL: upstreamUrl,
    GATEWAY_VOICE_UDP_HOST: '127.0.0.1',
    GATEWAY_VOICE_UDP_PORT: '0',
    GATEWAY_VOICE_UDP_PUBLIC_HOST: '127.0.0.1',
  };
}
