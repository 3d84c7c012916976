import Fastify, { type FastifyInstance } from 'fastify';
import { createServer, type Server } from 'node:net';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { registryPart, silentLog } from '../../../test/support/device-parts.js';
import { openFileLimit } from '../../src/links/connection-limits.js';
import { openListeners, warnIfOverOpenFileLimit } from '../../src/links/listeners.js';
import type { MqttLink, MqttLinkOptions } from '../../src/links/mqtt.js';

/** A port held by another listener on 127.0.0.1 (port 0: the OS picks it). */
async function holdPort(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as { port: number }).port };
}

/** The broker's options with a registry built from its parts (no gateway). */
function mqttOptions(port: number): MqttLinkOptions {
  const { registry, metrics } = registryPart();
  return {
    host: '127.0.0.1',
    port,
    maxPacketBytes: 64 * 1024,
    maxConnections: 10,
    maxConnectionsPerAddress: 10,
    maxUnreadBytes: 4 * 1024 * 1024,
    connectTimeoutMs: 5000,
    keepalive: { minSeconds: 10, maxSeconds: 600 },
    auth: { mode: 'open', tokens: [], secret: 'device-secret-0123456789', tokenMaxAgeSeconds: 3600 },
    apiKeys: () => [],
    registry,
    log: silentLog,
    metrics,
  };
}

describe('openListeners: a start whose ports are taken says which (issue 9 item 20)', () => {
  const held: Server[] = [];
  const opened: Array<{ close(): Promise<unknown> }> = [];
  let httpPort = 0;
  let mqttPort = 0;
  beforeAll(async () => {
    const a = await holdPort();
    const b = await holdPort();
    held.push(a.server, b.server);
    [httpPort, mqttPort] = [a.port, b.port];
  });
  afterEach(async () => {
    for (const o of opened.splice(0)) await o.close();
  });
  afterAll(() => Promise.all(held.map((s) => new Promise((resolve) => s.close(resolve)))));

  const http = (): FastifyInstance => {
    const app = Fastify();
    opened.push(app);
    return app;
  };
  const open = (httpAt: number, mqtt: { enabled: boolean; port: number }, onMqtt: (m: MqttLink) => void = (m) => void opened.push(m)) =>
    openListeners(http(), { http: { host: '127.0.0.1', port: httpAt }, mqtt: { ...mqtt, host: '127.0.0.1' } }, () => mqttOptions(mqtt.port), onMqtt);

  it('reports both the HTTP and the MQTT port when both are in use', async () => {
    const start = open(httpPort, { enabled: true, port: mqttPort });
    await expect(start).rejects.toThrow(`HTTP 127.0.0.1:${httpPort} is already in use (EADDRINUSE)`);
    await expect(start).rejects.toThrow(`MQTT 127.0.0.1:${mqttPort} is already in use (EADDRINUSE)`);
  });

  it('reports the one port that is in use, and hands over the listener that did open, to be closed', async () => {
    const links: MqttLink[] = [];
    await expect(open(httpPort, { enabled: true, port: 0 }, (m) => (links.push(m), opened.push(m)))).rejects.toThrow(
      /^cannot listen: HTTP 127\.0\.0\.1:\d+ is already in use \(EADDRINUSE\)$/,
    );
    expect(links).toHaveLength(1);
    expect(links[0]!.port).toBeGreaterThan(0);
    await expect(open(0, { enabled: true, port: mqttPort })).rejects.toThrow(/^cannot listen: MQTT 127\.0\.0\.1:\d+ is already in use \(EADDRINUSE\)$/);
  });

  it('opens both when both ports are free, and only HTTP when MQTT is off', async () => {
    const links: MqttLink[] = [];
    await open(0, { enabled: true, port: 0 }, (m) => (links.push(m), opened.push(m)));
    expect(links).toHaveLength(1);
    await open(0, { enabled: false, port: mqttPort }, (m) => links.push(m));
    expect(links).toHaveLength(1);
  });
});

describe('warnIfOverOpenFileLimit', () => {
  it('warns when the connection caps and headroom pass the open-file limit, and is quiet otherwise', () => {
    const lines: Array<Record<string, unknown>> = [];
    const log = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) });
    warnIfOverOpenFileLimit({ http: { maxConnections: 1 }, mqtt: { enabled: false, maxConnections: 1 } }, log);
    expect(lines).toEqual([]);
    warnIfOverOpenFileLimit({ http: { maxConnections: 10_000_000 }, mqtt: { enabled: true, maxConnections: 10_000_000 } }, log);
    // Where the limit is unknown (no /proc, or unlimited), nothing can be said.
    expect(lines).toHaveLength(openFileLimit() === undefined ? 0 : 1);
    if (lines.length > 0) expect(lines[0]).toMatchObject({ level: 40, httpMaxConnections: 10_000_000, mqttMaxConnections: 10_000_000, headroom: 512 });
  });
});
