import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import mqttPacket, { type Packet } from 'mqtt-packet';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MqttDeviceConnection, type MqttDeviceHooks } from '../../src/links/mqtt-device-connection.js';

const servers: Server[] = [];
afterEach(() => {
  vi.useRealTimers();
  for (const s of servers.splice(0)) s.close();
});

/** A connected pair on 127.0.0.1: the gateway's socket and the device's. */
async function socketPair(): Promise<{ near: Socket; far: Socket }> {
  const server = createServer();
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const far = connect((server.address() as { port: number }).port, '127.0.0.1');
  const [near] = (await once(server, 'connection')) as [Socket];
  await once(far, 'connect');
  return { near, far };
}

const KEEPALIVE_S = 60;
const noop = () => undefined;
const hooks: MqttDeviceHooks<unknown> = {
  isDevice: () => true,
  admit: () => ({ deviceId: 'd', clientUuid: 'u', credential: '', inbox: 'devices/p2p/d', keepaliveSeconds: KEEPALIVE_S }),
  ready: noop,
  message: noop,
  ping: noop,
  control: noop,
  refused: noop,
  protocolRefused: noop,
  malformed: noop,
  oversized: noop,
  keepaliveExpired: noop,
  noConnect: noop,
  handlerFailed: noop,
  closed: noop,
  handOff: noop,
  subscribeDenied: noop,
};

describe('MqttDeviceConnection keepalive', () => {
  it('measures silence on a monotonic clock: a wall-clock step forward does not drop a device that just spoke', async () => {
    // Only the link's timers and the wall clock are fake; sockets and performance.now are real.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const { near, far } = await socketPair();
    const conn = new MqttDeviceConnection(near, '127.0.0.1', {
      hooks,
      maxPacketBytes: 65_536,
      connectTimeoutMs: 10_000,
      unread: { maxBytes: 1 << 20, exceeded: () => false },
    });
    const parser = mqttPacket.parser();
    const got: Packet[] = [];
    parser.on('packet', (p: Packet) => got.push(p));
    far.on('data', (d: Buffer) => parser.parse(d));
    far.write(mqttPacket.generate({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: true, keepalive: KEEPALIVE_S, clientId: 'c' }));
    while (got.length === 0) await once(far, 'data');
    expect(got[0]?.cmd).toBe('connack');
    expect(conn.open).toBe(true);
    // NTP steps the clock an hour forward; the keepalive check then fires (1.5x keepalive after CONNECT, as the timer
    // sees it). Measured on Date.now the device looked silent for an hour and was closed; it spoke a moment ago.
    vi.setSystemTime(Date.now() + 3_600_000);
    vi.advanceTimersByTime(KEEPALIVE_S * 1500 + 1);
    expect(conn.open).toBe(true);
    conn.close();
    far.destroy();
  });
});
