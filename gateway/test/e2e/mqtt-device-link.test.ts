import mqttPacket, { type Packet } from 'mqtt-packet';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { RawMqtt } from '../../../test/support/raw-mqtt.js';
import { withTimeout } from '../../../test/support/wait.js';

let mac = 0x10;
const nextMac = () => `02_00_00_00_09_${(mac++).toString(16).padStart(2, '0')}`;
const clientIdFor = (m: string) => `GID_voxgate@@@${m}@@@uuid-${m}`;
const deviceIdOf = (m: string) => m.replace(/_/g, ':');
const bytes = (...packets: Packet[]) => Buffer.concat(packets.map((p) => mqttPacket.generate(p)));
const connectPacket = (clientId: string, extra: Partial<Packet> = {}): Packet =>
  ({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: true, keepalive: 60, clientId, ...extra }) as Packet;

/**
 * The link serves device clients itself (links/mqtt-device-connection.ts) and hands every other client to the
 * embedded broker: what a device may do, answered as a broker answers it, and what it may not, closed.
 */
describe('MQTT device connections served by the link', () => {
  let t: TestGateway;
  let port: number;
  const cleanup: Array<() => void> = [];

  beforeAll(async () => {
    t = await startTestGateway();
    port = Number(new URL(t.mqttUrl).port);
  });
  afterEach(() => {
    for (const f of cleanup.splice(0)) f();
  });
  afterAll(() => t.close());

  const open = async () => {
    const c = await RawMqtt.open(port);
    cleanup.push(() => c.destroy());
    return c;
  };

  it('answers packets that arrive with the CONNECT in one read, in order, and feeds the session', async () => {
    const m = nextMac();
    const online = t.nextEvent('device.online', deviceIdOf(m));
    const c = await open();
    const inbox = `devices/p2p/${m}`;
    c.sendBytes(
      bytes(
        connectPacket(clientIdFor(m)),
        {
          cmd: 'subscribe',
          messageId: 7,
          subscriptions: [
            { topic: inbox, qos: 1 },
            { topic: '#', qos: 0 },
            { topic: 'devices/p2p/02_00_00_00_00_01', qos: 0 },
          ],
        },
        { cmd: 'pingreq' },
        { cmd: 'unsubscribe', messageId: 8, unsubscriptions: [inbox] },
        {
          cmd: 'publish',
          topic: 'device-server',
          qos: 1,
          messageId: 9,
          payload: Buffer.from('{"type":"hello","version":3,"transport":"mqtt"}'),
          retain: false,
          dup: false,
        },
      ),
    );
    const connack = await c.nextOf('connack');
    expect([connack.returnCode, connack.sessionPresent]).toEqual([0, false]);
    expect((await c.nextOf('suback')).granted).toEqual([1, 128, 128]);
    await c.nextOf('pingresp');
    expect((await c.nextOf('unsuback')).messageId).toBe(8);
    expect((await c.nextOf('puback')).messageId).toBe(9);
    await online;
    // The session read the QoS 1 hello and answered it on the device's inbox; its MCP client initializes there too.
    const seen: Array<Record<string, unknown>> = [];
    while (!seen.some((f) => f['type'] === 'mcp') || !seen.some((f) => f['type'] === 'hello')) {
      const p = await c.nextOf('publish');
      expect(p.topic).toBe(inbox);
      seen.push(JSON.parse(p.payload.toString()) as Record<string, unknown>);
    }
    expect(seen.find((f) => f['type'] === 'mcp')).toMatchObject({ payload: { method: 'initialize' } });
  });

  it('closes a device that sends a packet before CONNECT, or a second CONNECT', async () => {
    const early = await open();
    early.send({ cmd: 'pingreq' });
    await withTimeout(early.closed.promise, 5000, 'a PINGREQ before CONNECT to close the socket');
    expect(early.endedByUs).toBe(false);

    const m = nextMac();
    const { c } = await RawMqtt.connect(port, { clientId: clientIdFor(m) });
    cleanup.push(() => c.destroy());
    const offline = t.nextEvent('device.offline', deviceIdOf(m));
    c.send(connectPacket(clientIdFor(m)));
    await withTimeout(c.closed.promise, 5000, 'a second CONNECT to close the socket');
    expect(c.endedByUs).toBe(false);
    await offline;
  });

  it('refuses protocol versions a device does not speak: MQTT 5 (v5 reason 0x84), an MQTT 3.1 id over 23 characters (2)', async () => {
    const v5 = await RawMqtt.open(port, { protocolVersion: 5 });
    cleanup.push(() => v5.destroy());
    v5.send(connectPacket(clientIdFor(nextMac()), { protocolVersion: 5 } as Partial<Packet>));
    expect((await v5.nextOf('connack')).reasonCode).toBe(0x84);
    await withTimeout(v5.closed.promise, 5000, 'the v5 client to be closed');

    const v3 = await open();
    v3.send(connectPacket(clientIdFor(nextMac()), { protocolId: 'MQIsdp', protocolVersion: 3 } as Partial<Packet>));
    expect((await v3.nextOf('connack')).returnCode).toBe(2);
    await withTimeout(v3.closed.promise, 5000, 'the 3.1 client to be closed');
  });

  it('hands a backend to the broker with what it sent so far: a CONNECT split byte by byte, then CONNECT and SUBSCRIBE in one read', async () => {
    const key = TEST_API_KEY;
    const backendConnect = (id: string) => connectPacket(id, { username: 'backend', password: Buffer.from(key) } as Partial<Packet>);
    const slow = await open();
    for (const b of mqttPacket.generate(backendConnect('backend-slow'))) {
      slow.sendBytes(Buffer.from([b]));
      await new Promise((r) => setImmediate(r));
    }
    expect((await slow.nextOf('connack')).returnCode).toBe(0);

    const fast = await open();
    fast.sendBytes(bytes(backendConnect('backend-fast'), { cmd: 'subscribe', messageId: 3, subscriptions: [{ topic: 'voxgate/events/#', qos: 0 }] }));
    expect((await fast.nextOf('connack')).returnCode).toBe(0);
    expect((await fast.nextOf('suback')).granted).toEqual([0]);
    // It reads events as a broker client: a device coming online is published to it.
    const m = nextMac();
    const { c } = await RawMqtt.connect(port, { clientId: clientIdFor(m) });
    cleanup.push(() => c.destroy());
    let event = await fast.nextOf('publish');
    while (!event.topic.startsWith(`voxgate/events/${deviceIdOf(m)}/`)) event = await fast.nextOf('publish');
    expect(event.topic.startsWith('voxgate/events/')).toBe(true);

    // Without the key it is refused by the broker, as before.
    const stranger = await open();
    stranger.send(connectPacket('not-a-device'));
    expect((await stranger.nextOf('connack')).returnCode).toBe(5);
  });

  it('the link stops with devices connected: its close ends their sockets', async () => {
    const gw = await startTestGateway();
    const m = nextMac();
    const online = gw.nextEvent('device.online', deviceIdOf(m));
    const { c } = await RawMqtt.connect(Number(new URL(gw.mqttUrl).port), { clientId: clientIdFor(m) });
    cleanup.push(() => c.destroy());
    await online;
    const pending = await RawMqtt.open(Number(new URL(gw.mqttUrl).port));
    cleanup.push(() => pending.destroy());
    await withTimeout(gw.close(), 10_000, 'the gateway to stop with a device and a socket without CONNECT open');
    await withTimeout(c.closed.promise, 5000, 'the device socket to be closed');
    await withTimeout(pending.closed.promise, 5000, 'the socket without CONNECT to be closed');
  });
});
