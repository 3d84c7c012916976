import { connect as netConnect } from 'node:net';
import { connect, type MqttClient } from 'mqtt';
import mqttPacket from 'mqtt-packet';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { boundKeepalive } from '../../src/links/mqtt-keepalive.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { RawMqtt } from '../../../test/support/raw-mqtt.js';
import { once, until, withTimeout } from '../../../test/support/wait.js';

/** The part of aedes' persistence these tests read: what the broker keeps per client id. */
interface BrokerStore {
  incomingGetPacket(client: { id: string }, packet: { messageId: number }): Promise<unknown>;
  subscriptionsByClient(client: { id: string }): Promise<unknown[]>;
}

let mac = 0x40;
const nextMac = () => `02_00_00_00_07_${(mac++).toString(16).padStart(2, '0')}`;
const clientIdFor = (m: string) => `GID_voxgate@@@${m}@@@uuid-${m}`;
const deviceIdOf = (m: string) => m.replace(/_/g, ':');

describe('MQTT sessions, presence and keepalive (devices hold nothing at the broker)', () => {
  let t: TestGateway;
  let port: number;
  const cleanup: Array<() => void> = [];
  const store = () => (t.gw.mqtt!.broker as unknown as { persistence: BrokerStore }).persistence;

  beforeAll(async () => {
    // deviceAuth "open": any device client id connects, so the tests need no credentials.
    t = await startTestGateway();
    port = Number(new URL(t.mqttUrl).port);
  });
  afterEach(() => {
    for (const f of cleanup.splice(0)) f();
  });
  afterAll(() => t.close());

  const raw = async (clientId: string, opts: { clean?: boolean; keepalive?: number; port?: number } = {}) => {
    const { c, connack } = await RawMqtt.connect(opts.port ?? port, { clientId, clean: opts.clean ?? true, keepalive: opts.keepalive ?? 60 });
    cleanup.push(() => c.destroy());
    return { c, connack };
  };

  it('serves clean=false as a clean session: QoS 2 is refused before it is stored, and nothing outlives the socket', async () => {
    const m = nextMac();
    const id = clientIdFor(m);
    const online = t.nextEvent('device.online', deviceIdOf(m));
    const { c, connack } = await raw(id, { clean: false });
    expect([connack.returnCode, connack.sessionPresent]).toEqual([0, false]);
    await online;

    // A subscription is session state too: it must not be kept after the socket.
    c.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: `devices/p2p/${m}`, qos: 1 }] });
    await c.nextOf('suback');

    // 60 KB QoS 2 publishes whose PUBREL never comes: the broker would hold each until it did.
    const payload = Buffer.alloc(60 * 1024, 'x');
    const N = 20;
    const offline = t.nextEvent('device.offline', deviceIdOf(m));
    for (let i = 1; i <= N; i++) c.send({ cmd: 'publish', topic: 'device-server', qos: 2, messageId: 100 + i, payload, retain: false, dup: false });
    // Either the broker drops us (QoS 2 refused) or it takes them (PUBREC); then we leave.
    await Promise.race([c.closed.promise, c.nextOf('pubrec').catch(() => undefined)]);
    c.destroy();
    await offline;

    // Nothing is kept for that client id: no QoS 2 packet, no subscription.
    const kept = await Promise.all(
      Array.from({ length: N }, (_, i) =>
        store()
          .incomingGetPacket({ id }, { messageId: 100 + i + 1 })
          .then(
            () => true,
            () => false,
          ),
      ),
    );
    expect(kept.filter(Boolean)).toHaveLength(0);
    expect(await store().subscriptionsByClient({ id })).toEqual([]);
    expect(await t.metric('voxgate_frames_rejected_total', { reason: 'mqtt_qos2' })).toBeGreaterThanOrEqual(1);

    // And the next connection finds no session.
    const again = await raw(id, { clean: false });
    expect(again.connack.sessionPresent).toBe(false);
  });

  it('a QoS 1 publish, which the reference firmware may use, still reaches the session', async () => {
    const m = nextMac();
    const { c } = await raw(clientIdFor(m));
    c.send({
      cmd: 'publish',
      topic: 'device-server',
      qos: 1,
      messageId: 7,
      payload: Buffer.from('{"type":"mcp","payload":{"jsonrpc":"2.0","id":1,"result":{}}}'),
      retain: false,
      dup: false,
    });
    expect(await c.nextOf('puback')).toMatchObject({ messageId: 7 });
  });

  it('presence follows the socket: 200 clients that drop during CONNECT leave no device online', async () => {
    const N = 200;
    const macs = Array.from({ length: N }, (_, i) => `02_00_00_08_${(i >> 8).toString(16).padStart(2, '0')}_${(i & 255).toString(16).padStart(2, '0')}`);
    await Promise.all(
      macs.map(
        (m) =>
          new Promise<void>((resolve) => {
            const s = netConnect(port, '127.0.0.1', () => {
              s.write(mqttPacket.generate({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: true, clientId: clientIdFor(m), keepalive: 60 }));
              s.destroy();
            });
            s.on('error', () => {});
            s.on('close', () => resolve());
          }),
      ),
    );
    // Every socket closed on the gateway's side too...
    await until(async () => (await t.metric('voxgate_connections_open', { listener: 'mqtt' })) === 0, 'the MQTT sockets to close');
    // ...and a device connecting and leaving after them has been fully handled: aedes' late reports
    // for the earlier ones (if any) are in by now.
    const sentinel = nextMac();
    const ready = t.nextEvent('device.ready', deviceIdOf(sentinel));
    const client: MqttClient = connect(t.mqttUrl, { clientId: clientIdFor(sentinel), reconnectPeriod: 0 });
    client.on('message', (_topic, payload) => {
      const msg = JSON.parse(payload.toString()) as { payload?: { id?: number; method?: string } };
      const rpc = msg.payload;
      if (rpc?.id === undefined) return;
      const result =
        rpc.method === 'initialize' ? { protocolVersion: '2024-11-05', capabilities: { tools: {} }, serverInfo: { name: 's', version: '1' } } : { tools: [] };
      client.publish('device-server', JSON.stringify({ type: 'mcp', payload: { jsonrpc: '2.0', id: rpc.id, result } }));
    });
    await ready;
    const gone = t.nextEvent('device.offline', deviceIdOf(sentinel));
    client.end(true);
    await gone;

    const stillOnline = t.gw.registry.page({ online: true }, { limit: 100_000 }).devices.filter((d) => macs.includes(d.id.replace(/:/g, '_')));
    expect(stillOnline).toEqual([]);
    expect(await t.metric('voxgate_devices_connected', { transport: 'mqtt' })).toBe(0);
  });

  it('a second CONNECT with the same client id takes over; the old socket closing leaves the device online', async () => {
    const m = nextMac();
    const id = clientIdFor(m);
    const first = await raw(id);
    await until(() => t.gw.registry.get(deviceIdOf(m))?.online === true, 'the first connection to be online');
    const openBefore = await t.metric('voxgate_connections_open', { listener: 'mqtt' });
    const replaced = t.nextEvent('device.online', deviceIdOf(m));
    await raw(id);
    await replaced;
    await withTimeout(first.c.closed.promise, 5000, 'the broker to close the replaced connection');
    // The gateway has handled the old socket's close once the open-socket gauge is back to one each.
    await until(async () => (await t.metric('voxgate_connections_open', { listener: 'mqtt' })) === openBefore, 'the old socket to be counted closed');
    expect(t.gw.registry.get(deviceIdOf(m))?.online).toBe(true);
    const offline = t.nextEvent('device.offline', deviceIdOf(m));
    for (const f of cleanup.splice(0)) f();
    await offline;
    expect(t.gw.registry.get(deviceIdOf(m))?.online).toBe(false);
  });

  it('keepalive 0 is held to the maximum: a silent client is closed at 1.5x, goes offline, and the close is counted', async () => {
    const short = await startTestGateway({ mqtt: { keepaliveMinSeconds: 1, keepaliveMaxSeconds: 1 } });
    cleanup.push(() => void short.close());
    const silentCloses = () => short.metric('voxgate_connections_refused_total', { listener: 'mqtt', reason: 'keepalive' });
    expect(await silentCloses()).toBe(0);
    const m = nextMac();
    const offline = short.nextEvent('device.offline', deviceIdOf(m), 20_000);
    const { c } = await raw(clientIdFor(m), { keepalive: 0, port: Number(new URL(short.mqttUrl).port) });
    // It never pings; keepaliveMaxSeconds is 1 here, so the broker gives up after 1.5 s of silence.
    await withTimeout(c.closed.promise, 10_000, 'the broker to close a silent keepalive-0 client');
    expect(c.endedByUs).toBe(false);
    const gone = await offline;
    // Before: a device dropped for its silence was counted nowhere (its close looked like any disconnect).
    expect(await silentCloses()).toBe(1);
    expect(short.logs.some((l) => l['msg'] === 'MQTT device silent past 1.5x its keepalive; disconnected' && l['clientId'] === clientIdFor(m))).toBe(true);
    expect(gone.data).toMatchObject({ reason: 'mqtt keepalive expired' });
  });

  it('keeps a keepalive within [min, max]; 0 means "none" and gets the max', () => {
    const b = { minSeconds: 10, maxSeconds: 300 };
    expect(boundKeepalive(0, b)).toBe(300);
    expect(boundKeepalive(undefined, b)).toBe(300);
    expect(boundKeepalive(65_535, b)).toBe(300);
    expect(boundKeepalive(1, b)).toBe(10);
    expect(boundKeepalive(240, b)).toBe(240);
  });

  it('counts only real protocol violations as mqtt_protocol, not ordinary disconnects', async () => {
    const before = await t.metric('voxgate_frames_rejected_total', { reason: 'mqtt_protocol' });
    // A clean DISCONNECT, an abrupt close, and a close by the broker: none is a protocol violation.
    const polite = nextMac();
    let offline = t.nextEvent('device.offline', deviceIdOf(polite));
    const a = connect(t.mqttUrl, { clientId: clientIdFor(polite), reconnectPeriod: 0, keepalive: 1 });
    await once(a, 'connect');
    await new Promise<void>((resolve) => a.end(false, {}, () => resolve()));
    await offline;

    const abrupt = nextMac();
    offline = t.nextEvent('device.offline', deviceIdOf(abrupt));
    const { c } = await raw(clientIdFor(abrupt));
    c.destroy();
    await offline;

    const denied = nextMac();
    offline = t.nextEvent('device.offline', deviceIdOf(denied));
    const d = await raw(clientIdFor(denied));
    d.c.send({ cmd: 'publish', topic: 'devices/p2p/somebody_else', qos: 0, payload: Buffer.from('x'), retain: false, dup: false });
    await offline;
    expect(await t.metric('voxgate_frames_rejected_total', { reason: 'mqtt_protocol' })).toBe(before);

    // A remaining length that never ends (5 continuation bytes) is one.
    const bad = await RawMqtt.open(port);
    cleanup.push(() => bad.destroy());
    bad.sendBytes(Buffer.from([0x30, 0xff, 0xff, 0xff, 0xff, 0x01]));
    await withTimeout(bad.closed.promise, 5000, 'the malformed client to be dropped');
    expect(await t.metric('voxgate_frames_rejected_total', { reason: 'mqtt_protocol' })).toBe(before + 1);
  });
});
