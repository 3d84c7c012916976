import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { RawMqtt } from '../../../test/support/raw-mqtt.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { until } from '../../../test/support/wait.js';

/**
 * A peer of the device links that stops reading what it is sent while it keeps sending (or while events are written
 * to it). Before, every answer waited in the gateway's memory: 80 MB for one device after 71 MB of requests. Now the
 * connection is closed once more than voice.maxBufferedBytes + 4 MiB wait unread (links/unread-bound.ts).
 */

/** Past this much sent without a cut, the gateway kept what the peer did not read (the old code's behaviour). */
const GIVE_UP_BYTES = 96 * 1024 * 1024;

/** A request the gateway answers (devices have nothing to ask it: "Method not found", the id echoed). */
const request = (n: number) =>
  JSON.stringify({ type: 'mcp', session_id: 's', payload: { jsonrpc: '2.0', id: `${n}-${'i'.repeat(240)}`, method: `m/${'x'.repeat(250)}` } });

/** Send `frame()` in batches, letting the gateway read between them, until `done` settles or GIVE_UP_BYTES went out. */
async function flood(send: (text: string) => void, done: Promise<unknown>, what: string): Promise<number> {
  let settled = false;
  void done.then(() => (settled = true));
  let sent = 0;
  for (let n = 0; !settled; n++) {
    if (sent > GIVE_UP_BYTES) throw new Error(`${what}: ${sent} bytes sent and never read, and the gateway kept the connection`);
    const text = request(n);
    for (let i = 0; i < 200; i++) send(text);
    sent += 200 * text.length;
    await new Promise((r) => setTimeout(r, 2));
  }
  return sent;
}

let mac = 0x10;
const nextMac = () => `02:00:00:00:0d:${(mac++).toString(16).padStart(2, '0')}`;

describe('a device link peer that stops reading is cut', () => {
  let t: TestGateway;

  beforeAll(async () => {
    // device.message events at any rate (the backend case reads events), none kept in the history; the devices' frames
    // unpaced (the read budget would pace the floods that make the answers pile up: read-budget.test.ts covers it).
    t = await startTestGateway({
      events: { devicePerSecond: 100_000, deviceBurst: 100_000, history: { enabled: false } },
      frames: { devicePerSecond: 1_000_000, deviceBurst: 1_000_000, addressPerSecond: 1_000_000, addressBurst: 1_000_000 },
    });
  });
  afterAll(() => t.close());

  const unreadCuts = (listener: string) => t.metric('voxgate_connections_refused_total', { listener, reason: 'unread' });

  it('a WebSocket device that sends requests and reads none of the answers', async () => {
    const deviceId = nextMac();
    const before = await unreadCuts('http');
    const ws = new WebSocket(t.wsUrl, { headers: { 'device-id': deviceId } });
    const hello = new Promise((r) => ws.once('message', r));
    await new Promise((r) => ws.once('open', r));
    ws.send(JSON.stringify({ type: 'hello', version: 1, transport: 'websocket' }));
    await hello;
    (ws as unknown as { _socket: Socket })._socket.pause();
    const offline = t.nextEvent('device.offline', deviceId, 120_000);
    await flood((s) => ws.send(s), offline, 'WebSocket device');
    await offline;
    expect(await unreadCuts('http')).toBe(before + 1);
    expect(t.logs.some((l) => l['msg'] === 'peer stopped reading what it is sent; closing its connection' && l['deviceId'] === deviceId)).toBe(true);
    ws.terminate();

    // Another device is served as before.
    const d = new ReferenceDevice({ deviceId: nextMac() });
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(t.wsUrl);
    await ready;
    const r = await t.api('POST', `/v1/devices/${d.deviceId}/tools/self.get_device_status/call`, { arguments: {} });
    expect(r.status).toBe(200);
    d.terminate();
  }, 180_000);

  it('an MQTT device that publishes requests and reads none of the answers', async () => {
    const deviceId = nextMac();
    const before = await unreadCuts('mqtt');
    const clientId = `GID_test@@@${deviceId.replaceAll(':', '_')}@@@u1`;
    const { c, connack } = await RawMqtt.connect(t.gw.mqttPort!, { clientId, username: 'u', password: Buffer.from('p') });
    expect(connack.returnCode).toBe(0);
    await c.nextOf('publish'); // the gateway's initialize: the device is attached
    c.socket.pause();
    const offline = t.nextEvent('device.offline', deviceId, 120_000);
    const publish = (s: string) => c.send({ cmd: 'publish', topic: 'device-server', payload: Buffer.from(s), qos: 0, retain: false, dup: false });
    await flood(publish, offline, 'MQTT device');
    await offline;
    expect(await unreadCuts('mqtt')).toBe(before + 1);
    c.destroy();
  }, 180_000);

  it('an MQTT backend that subscribes to the events and reads none of them, while the MQTT devices go on', async () => {
    // Before, the broker waited for the backend's socket to drain with each event it delivered, 100 at most for all
    // clients: once they were taken, every device's publishes (its MCP replies) waited too, until aedes' 60 s drain
    // timeout, and the queue built meanwhile overflowed the stack when it was released.
    const mqttDevice = new ReferenceDevice({ deviceId: nextMac() });
    const ready = t.nextEvent('device.ready', mqttDevice.deviceId);
    await mqttDevice.connectMqtt(t.mqttUrl, { clientId: `GID_test@@@${mqttDevice.deviceId.replaceAll(':', '_')}@@@u2`, username: 'u', password: 'p' });
    await ready;
    const before = await unreadCuts('mqtt');
    const { c: backend, connack } = await RawMqtt.connect(t.gw.mqttPort!, {
      clientId: 'backend-unread',
      username: 'backend',
      password: Buffer.from(TEST_API_KEY),
    });
    expect(connack.returnCode).toBe(0);
    backend.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'voxgate/events/#', qos: 0 }] });
    await backend.nextOf('suback');
    backend.socket.pause();
    // A device whose messages are events (7 KiB each, under the 8 KiB an event carries).
    const deviceId = nextMac();
    const ws = new WebSocket(t.wsUrl, { headers: { 'device-id': deviceId } });
    await new Promise((r) => ws.once('open', r));
    ws.send(JSON.stringify({ type: 'hello', version: 1, transport: 'websocket' }));
    const cut = (async () => {
      while ((await unreadCuts('mqtt')) === before) await new Promise((r) => setTimeout(r, 50));
    })();
    let sent = 0;
    let settled = false;
    void cut.then(() => (settled = true));
    const note = JSON.stringify({ type: 'note', text: 'n'.repeat(7 * 1024) });
    while (!settled) {
      if (sent > GIVE_UP_BYTES) throw new Error(`${sent} bytes of events written to a backend that reads none, and it was kept`);
      for (let i = 0; i < 50; i++) ws.send(note);
      sent += 50 * note.length;
      await new Promise((r) => setTimeout(r, 5));
    }
    ws.terminate();
    backend.destroy();
    const r = await t.api('POST', `/v1/devices/${mqttDevice.deviceId}/tools/self.get_device_status/call`, { arguments: {} });
    expect(r.status).toBe(200);
    mqttDevice.terminate();
  }, 180_000);
  it('a burst of publishes behind the events on their way to a backend is delivered, not queued until the stack overflows', async () => {
    // aedes delivered at most 100 messages at once and queued the rest; the queue was released recursively, a group of
    // stack frames per message that reached no subscriber (a device's publish to device-server): 3 000 of them arriving
    // in one tick (a fleet's publishes read in one poll phase) behind 200 events overflowed the stack. Now nothing queues.
    const { c: backend } = await RawMqtt.connect(t.gw.mqttPort!, { clientId: 'backend-burst', username: 'backend', password: Buffer.from(TEST_API_KEY) });
    backend.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'voxgate/events/#', qos: 0 }] });
    await backend.nextOf('suback');
    for (let i = 0; i < 200; i++) t.gw.bus.publish('device.online', nextMac(), {});
    let delivered = 0;
    const publish = { cmd: 'publish', topic: 'device-server', payload: Buffer.from('{}'), qos: 0, retain: false, dup: false } as const;
    for (let i = 0; i < 3000; i++) t.gw.mqtt!.broker.publish({ ...publish }, () => delivered++);
    await until(() => delivered === 3000, 'every publish delivered');
    expect((await fetch(`${t.baseUrl}/healthz`)).status).toBe(200);
    backend.destroy();
  });
});
