import { connect as netConnect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestGateway } from '../../../test/support/gateway-harness.js';
import { RawMqtt } from '../../../test/support/raw-mqtt.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { deferred, until, withTimeout, type Deferred } from '../../../test/support/wait.js';

/** An idle TCP socket that sends nothing; `closed` settles when the gateway (or anyone) closes it. */
interface Idle {
  socket: Socket;
  closed: Deferred<void>;
}

const idleSocket = (port: number, localAddress?: string): Promise<Idle> =>
  new Promise((resolve) => {
    const closed = deferred();
    const socket = netConnect({ port, host: '127.0.0.1', ...(localAddress ? { localAddress } : {}) });
    socket.on('error', () => {});
    socket.on('close', () => closed.resolve());
    // Read (and drop) whatever comes, e.g. a 408: an unread stream would never see the close.
    socket.resume();
    // Resolves on connect, or on close for a socket refused before the handshake is seen here.
    socket.once('connect', () => resolve({ socket, closed }));
    socket.once('close', () => resolve({ socket, closed }));
  });

const portOf = (url: string) => Number(new URL(url).port);

let mac = 0x10;
const nextMac = () => `02:00:00:00:0c:${(mac++).toString(16).padStart(2, '0')}`;

describe('connection limits: caps per listener and per source, idle deadlines, a reserve for the API', () => {
  const cleanup: Array<() => unknown> = [];
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });
  const gateway = async (overrides: Parameters<typeof startTestGateway>[0]) => {
    const t = await startTestGateway(overrides);
    cleanup.push(() => t.close());
    return t;
  };
  const open = async (n: number, port: number, localAddress?: string) => {
    const sockets = await Promise.all(Array.from({ length: n }, () => idleSocket(port, localAddress)));
    cleanup.push(() => sockets.forEach((s) => s.socket.destroy()));
    return sockets;
  };
  /** Resolves with how many of `sockets` have closed, once `n` of them have. */
  const closedCount = async (sockets: Idle[], n: number) => {
    let closed = 0;
    await withTimeout(
      new Promise<void>((resolve) => {
        for (const s of sockets)
          void s.closed.promise.then(() => {
            if (++closed === n) resolve();
          });
        if (n === 0) resolve();
      }),
      10_000,
      `${n} sockets to be closed by the gateway`,
    );
    return closed;
  };

  it('MQTT: a few hundred idle sockets fill the listener cap; the rest are refused and the HTTP API still answers', async () => {
    const t = await gateway({ mqtt: { maxConnections: 40, maxConnectionsPerAddress: 1000, connectTimeoutMs: 60_000 } });
    const port = portOf(t.mqttUrl);
    const sockets = await open(200, port);
    expect(await closedCount(sockets, 160)).toBeGreaterThanOrEqual(160);
    expect(await t.metric('voxgate_connections_refused_total', { listener: 'mqtt', reason: 'listener_full' })).toBe(160);
    expect(await t.metric('voxgate_connections_open', { listener: 'mqtt' })).toBe(40);

    const health = await fetch(`${t.baseUrl}/healthz`);
    expect(health.status).toBe(200);
    // While full, a real device is refused too...
    const late = await idleSocket(port);
    await withTimeout(late.closed.promise, 5000, 'a socket past the cap to be closed');
    // ...and gets in once the idle ones are gone.
    for (const s of sockets) s.socket.destroy();
    await until(async () => (await t.metric('voxgate_connections_open', { listener: 'mqtt' })) === 0, 'the gateway to see the idle sockets close');
    const { c, connack } = await RawMqtt.connect(port, { clientId: 'GID_voxgate@@@02_00_00_00_0c_ff@@@u' });
    cleanup.push(() => c.destroy());
    expect(connack.returnCode).toBe(0);
  });

  it('MQTT: one source address gets its own cap; another address still connects', async () => {
    const t = await gateway({ mqtt: { maxConnections: 1000, maxConnectionsPerAddress: 20, connectTimeoutMs: 60_000 } });
    const port = portOf(t.mqttUrl);
    const flood = await open(30, port, '127.0.0.2');
    expect(await closedCount(flood, 10)).toBe(10);
    expect(await t.metric('voxgate_connections_refused_total', { listener: 'mqtt', reason: 'address_full' })).toBe(10);

    const other = await RawMqtt.open(port, { localAddress: '127.0.0.3' });
    cleanup.push(() => other.destroy());
    other.send({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: true, keepalive: 60, clientId: 'GID_voxgate@@@02_00_00_00_0c_fe@@@u' });
    expect((await other.nextOf('connack')).returnCode).toBe(0);
  });

  it('MQTT: a socket that sends no CONNECT is closed at the deadline; a device that did is kept', async () => {
    const t = await gateway({ mqtt: { connectTimeoutMs: 300 } });
    const port = portOf(t.mqttUrl);
    const device = new ReferenceDevice({ deviceId: nextMac() });
    cleanup.push(() => device.terminate());
    const ready = t.nextEvent('device.ready', device.deviceId);
    await device.connectMqtt(t.mqttUrl, { clientId: `GID_voxgate@@@${device.deviceId.replace(/:/g, '_')}@@@u` });
    await ready;
    const [idle] = await open(1, port);
    await withTimeout(idle!.closed.promise, 10_000, 'the idle MQTT socket to be closed');
    expect(await t.metric('voxgate_connections_refused_total', { listener: 'mqtt', reason: 'no_connect' })).toBe(1);
    // The deadline has passed for the device too (it connected first): it is still served.
    const r = await t.api('POST', `/v1/devices/${device.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 5 } });
    expect(r.status).toBe(200);
  });

  it('HTTP: a socket that sends no request is closed at the deadline', async () => {
    const t = await gateway({ http: { headersTimeoutMs: 300 } });
    const [idle] = await open(1, t.gw.httpPort);
    await withTimeout(idle!.closed.promise, 10_000, 'the idle HTTP socket to be closed');
    expect(await t.metric('voxgate_connections_refused_total', { listener: 'http', reason: 'no_request' })).toBe(1);
  });

  it('HTTP: one source address gets its own cap; health checks from another still answer', async () => {
    const t = await gateway({ http: { maxConnectionsPerAddress: 20, headersTimeoutMs: 60_000 } });
    const flood = await open(30, t.gw.httpPort, '127.0.0.2');
    expect(await closedCount(flood, 10)).toBe(10);
    expect(await t.metric('voxgate_connections_refused_total', { listener: 'http', reason: 'address_full' })).toBe(10);
    expect((await fetch(`${t.baseUrl}/healthz`)).status).toBe(200);
  });

  it('HTTP: device WebSockets stop at their cap, below the port cap, so the API keeps its reserve', async () => {
    const t = await gateway({ ws: { maxConnections: 2 }, http: { maxConnections: 10 } });
    for (let i = 0; i < 2; i++) {
      const d = new ReferenceDevice({ deviceId: nextMac() });
      cleanup.push(() => d.terminate());
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(t.wsUrl);
      await ready;
    }
    const third = new ReferenceDevice({ deviceId: nextMac() });
    cleanup.push(() => third.terminate());
    await expect(third.connectWebSocket(t.wsUrl)).rejects.toMatchObject({ statusCode: 503 });
    expect(await t.metric('voxgate_connections_refused_total', { listener: 'http', reason: 'device_cap' })).toBe(1);
    expect((await fetch(`${t.baseUrl}/healthz`)).status).toBe(200);
    const list = await t.api<{ devices?: unknown[] } | unknown[]>('GET', '/v1/devices');
    expect(list.status).toBe(200);
  });

  it('HTTP: sockets past the port cap are refused at accept and counted', async () => {
    const t = await gateway({ ws: { maxConnections: 5 }, http: { maxConnections: 10, maxConnectionsPerAddress: 1000, headersTimeoutMs: 60_000 } });
    const sockets = await open(30, t.gw.httpPort);
    expect(await closedCount(sockets, 20)).toBeGreaterThanOrEqual(20);
    // The port is full: free it before asking for the metric.
    for (const s of sockets) s.socket.destroy();
    await Promise.all(sockets.map((s) => s.closed.promise));
    expect(await t.metric('voxgate_connections_refused_total', { listener: 'http', reason: 'listener_full' })).toBe(20);
  });
});
