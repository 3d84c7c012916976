import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { HttpConfig } from '../api/config.js';
import type { MqttConfig } from './config.js';
import { openFileLimit } from './connection-limits.js';
import { startMqttLink, type MqttLink, type MqttLinkOptions } from './mqtt.js';

/**
 * Open the HTTP port and the broker together, so a start that fails reports every port that failed, not
 * the first. When one fails, the other (if it opened) is returned to be closed with the rest.
 */
export async function openListeners(
  http: FastifyInstance,
  s: { http: Pick<HttpConfig, 'host' | 'port'>; mqtt: Pick<MqttConfig, 'enabled' | 'host' | 'port'> },
  mqttOptions: () => MqttLinkOptions,
  onMqtt: (mqtt: MqttLink) => void,
): Promise<void> {
  const [mqttStart, httpStart] = await Promise.allSettled([
    s.mqtt.enabled ? startMqttLink(mqttOptions()) : Promise.resolve(undefined),
    http.listen({ host: s.http.host, port: s.http.port }),
  ]);
  if (mqttStart.status === 'fulfilled' && mqttStart.value) onMqtt(mqttStart.value);
  const failed = [
    ...(httpStart.status === 'rejected' ? [listenProblem('HTTP', s.http.host, s.http.port, httpStart.reason)] : []),
    ...(mqttStart.status === 'rejected' ? [listenProblem('MQTT', s.mqtt.host, s.mqtt.port, mqttStart.reason)] : []),
  ];
  if (failed.length) throw new Error(`cannot listen: ${failed.join('; ')}`);
}

/** "HTTP 0.0.0.0:8000 is already in use (EADDRINUSE)": which listener, where, and why, for the person starting it. */
function listenProblem(listener: string, host: string, port: number, err: unknown): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const why =
    code === 'EADDRINUSE' ? 'is already in use' : code === 'EACCES' ? 'needs more privileges' : `failed: ${err instanceof Error ? err.message : String(err)}`;
  return `${listener} ${host}:${port} ${why}${code ? ` (${code})` : ''}`;
}

/** Each socket is a descriptor: caps whose sum passes the process's limit let one port starve the other. */
export function warnIfOverOpenFileLimit(
  s: { http: Pick<HttpConfig, 'maxConnections'>; mqtt: Pick<MqttConfig, 'enabled' | 'maxConnections'> },
  log: Logger,
): void {
  const limit = openFileLimit();
  const mqttMax = s.mqtt.enabled ? s.mqtt.maxConnections : 0;
  const sockets = s.http.maxConnections + mqttMax;
  // Files, child processes' pipes, DNS and upstream connections need descriptors too.
  const headroom = 512;
  if (limit !== undefined && sockets + headroom > limit)
    log.warn(
      { openFileLimit: limit, httpMaxConnections: s.http.maxConnections, mqttMaxConnections: mqttMax, headroom },
      'connection caps exceed the open-file limit: raise `ulimit -n` or lower http.maxConnections / mqtt.maxConnections',
    );
}
