import { connect as netConnect } from 'node:net';
import { connect as mqttConnect, ErrorWithReasonCode } from 'mqtt';
import mqttPacket, { type Packet } from 'mqtt-packet';
import { mqttPassword } from '@voxgate/protocol';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { mqttFrame, RawMqtt } from '../../../test/support/raw-mqtt.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { until, withTimeout } from '../../../test/support/wait.js';

let mac = 0x10;
const nextMac = () => `02_00_00_00_0b_${(mac++).toString(16).padStart(2, '0')}`;
const clientIdFor = (m: string) => `GID_voxgate@@@${m}@@@uuid-${m}`;
const deviceIdOf = (m: string) => m.replace(/_/g, ':');
const str = (s: string | Buffer) => {
  const b = Buffer.isBuffer(s) ? s : Buffer.from(s);
  return Buffer.concat([Buffer.from([b.length >> 8, b.length & 0xff]), b]);
};
/** A CONNECT with the flags byte as given (mqtt-packet's generator would not write the illegal ones). */
const rawConnect = (clientId: string, flags: number, fields: Array<string | Buffer> = []) =>
  mqttFrame(0x10, Buffer.concat([str('MQTT'), Buffer.from([4, flags, 0, 60]), str(clientId), ...fields.map(str)]));
const publishTo = (topic: Buffer, payload = '{}') => mqttFrame(0x30, Buffer.concat([str(topic), Buffer.from(payload)]));
const gen = (p: Packet) => mqttPacket.generate(p);

/**
 * The device MQTT link (links/mqtt-device-connection.ts) against a hostile or non-conforming client: every violation
 * of MQTT 3.1.1 a server must close on is closed and counted, what a device may do is answered, and a healthy device
 * on the same gateway keeps being served, with nothing thrown out of a handler.
 */
describe('MQTT device link: hostile and non-conforming clients', () => {
  let t: TestGateway;
  let port: number;
  let healthy: RawMqtt;
  const cleanup: Array<() => void> = [];
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown) => uncaught.push(err);

  beforeAll(async () => {
    process.on('uncaughtException', onUncaught);
    t = await startTestGateway({ mqtt: { connectTimeoutMs: 1000 } });
    port = Number(new URL(t.mqttUrl).port);
    healthy = (await RawMqtt.connect(port, { clientId: clientIdFor(nextMac()) })).c;
  });
  afterEach(async () => {
    for (const f of cleanup.splice(0)) f();
    // The healthy device is still served after each case.
    healthy.send({ cmd: 'pingreq' });
    await healthy.nextOf('pingresp', 5000);
    expect(uncaught).toEqual([]);
  });
  afterAll(async () => {
    healthy.destroy();
    await t.close();
    process.off('uncaughtException', onUncaught);
  });

  const open = async () => {
    const c = await RawMqtt.open(port);
    cleanup.push(() => c.destroy());
    return c;
  };
  const device = async (m = nextMac()) => {
    const { c, connack } = await RawMqtt.connect(port, { clientId: clientIdFor(m) });
    cleanup.push(() => c.destroy());
    expect(connack.returnCode).toBe(0);
    return c;
  };
  const protocolErrors = () => t.metric('voxgate_frames_rejected_total', { reason: 'mqtt_protocol' });
  /** The server closed the socket without writing a single packet back. */
  const closedSilently = async (c: RawMqtt, what: string) => {
    await withTimeout(c.closed.promise, 30_000, what);
    expect(c.endedByUs).toBe(false);
    expect(c.packets.size).toBe(0);
  };

  it('closes a CONNECT with the reserved flag set, or with will flags that need the will flag [MQTT-3.1.2-3, -11, -13, -15]', async () => {
    const before = await protocolErrors();
    for (const flags of [0x03, 0x02 | 0x20, 0x02 | 0x08, 0x02 | 0x10]) {
      const c = await open();
      c.sendBytes(rawConnect(clientIdFor(nextMac()), flags));
      await closedSilently(c, `CONNECT flags 0x${flags.toString(16)} to close the socket`);
    }
    expect(await protocolErrors()).toBe(before + 4);
  });

  it('closes a CONNECT with will QoS 3 [MQTT-3.1.2-14], and one with a password but no user name [MQTT-3.1.2-22]', async () => {
    const before = await protocolErrors();
    const willQos3 = await open();
    willQos3.sendBytes(rawConnect(clientIdFor(nextMac()), 0x02 | 0x04 | 0x18, ['devices/will', 'gone']));
    await closedSilently(willQos3, 'a will with QoS 3 to close the socket');
    const passwordOnly = await open();
    passwordOnly.sendBytes(rawConnect(clientIdFor(nextMac()), 0x02 | 0x40, ['secret']));
    await closedSilently(passwordOnly, 'a password without a user name to close the socket');
    expect(await protocolErrors()).toBe(before + 2);
  });

  it('answers a protocol level it does not support with CONNACK 1, then closes, device or backend, and counts it [MQTT-3.1.2-2]', async () => {
    const levelRefusals = () => t.metric('voxgate_frames_rejected_total', { reason: 'mqtt_protocol_level' });
    const before = await levelRefusals();
    const protocolBefore = await protocolErrors();
    const levelConnect = (clientId: string, level: number) => mqttFrame(0x10, Buffer.concat([str('MQTT'), Buffer.from([level, 0x02, 0, 60]), str(clientId)]));
    // Levels the parser cannot read (0, 6, 127, 0x86 a bridge flag on 6), from a device client id and from a backend's
    // (MQTT 5 gets its own CONNACK, below). Before: 0 and 6+ were closed silently as malformed.
    const cases: Array<[string, Buffer]> = [
      ['level 0, device', levelConnect(clientIdFor(nextMac()), 0)],
      ['level 6, device', levelConnect(clientIdFor(nextMac()), 6)],
      ['level 127, backend', levelConnect('backend-x', 127)],
      ['level 6 with the bridge flag, backend', levelConnect('backend-y', 0x86)],
    ];
    for (const [what, bytes] of cases) {
      const c = await open();
      c.sendBytes(bytes);
      const connack = await c.nextOf('connack');
      expect(connack.returnCode, what).toBe(1);
      expect(connack.sessionPresent, what).toBe(false);
      await withTimeout(c.closed.promise, 30_000, `${what}: the socket to be closed after CONNACK 1`);
      expect(c.endedByUs).toBe(false);
    }
    expect(await levelRefusals()).toBe(before + cases.length);
    expect(await protocolErrors()).toBe(protocolBefore);
    expect(t.logs.some((l) => l['msg'] === 'MQTT CONNECT refused: unacceptable protocol level' && l['level'] === 40 && l['protocolLevel'] === 6)).toBe(true);
    // A protocol name it does not know is still malformed: closed without an answer.
    const named = await open();
    named.sendBytes(mqttFrame(0x10, Buffer.concat([str('MQTX'), Buffer.from([4, 0x02, 0, 60]), str(clientIdFor(nextMac()))])));
    await closedSilently(named, 'an unknown protocol name to close the socket');
    expect(await protocolErrors()).toBe(protocolBefore + 1);
  });

  it('answers an MQTT 5 CONNECT with the MQTT 5 CONNACK 0x84 (Unsupported Protocol Version), then closes, device or backend [MQTT 5.0 3.2.2.2, 4.13]', async () => {
    const levelRefusals = () => t.metric('voxgate_frames_rejected_total', { reason: 'mqtt_protocol_level' });
    const before = await levelRefusals();
    const protocolBefore = await protocolErrors();
    const v5 = (clientId: string) => gen({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 5, clean: true, keepalive: 60, clientId });
    // The exact bytes, read to the server's close: flags 0, reason 0x84, property length 0, and nothing else.
    // Before: the 3.1.1 CONNACK 20 02 00 01, which an MQTT 5 parser reads as reason 1 with no property length.
    const cases: Array<[string, Buffer]> = [
      ['device', v5(clientIdFor(nextMac()))],
      ['backend', v5('backend-z')],
      // A bridge's MQTT 5 (level 0x85), and an MQTT 5 CONNECT whose properties the parser refuses (property 0xff).
      ['bridge', mqttFrame(0x10, Buffer.concat([str('MQTT'), Buffer.from([0x85, 0x02, 0, 60, 0]), str('backend-b')]))],
      ['unreadable properties', mqttFrame(0x10, Buffer.concat([str('MQTT'), Buffer.from([5, 0x02, 0, 60, 1, 0xff]), str(clientIdFor(nextMac()))]))],
    ];
    for (const [what, bytes] of cases) {
      const socket = netConnect({ port, host: '127.0.0.1' });
      cleanup.push(() => socket.destroy());
      const got: Buffer[] = [];
      socket.on('data', (d: Buffer) => got.push(d));
      const ended = new Promise<void>((resolve) => socket.on('end', resolve));
      socket.write(bytes);
      await withTimeout(ended, 30_000, `${what}: the server to end the socket after the CONNACK`);
      expect(Buffer.concat(got).toString('hex'), what).toBe('2003008400');
    }
    expect(await levelRefusals()).toBe(before + cases.length);
    expect(await protocolErrors()).toBe(protocolBefore);
    expect(t.logs.some((l) => l['msg'] === 'MQTT CONNECT refused: unacceptable protocol level' && l['protocolLevel'] === 5)).toBe(true);
  });

  it('a real MQTT 5 client (mqtt.js, protocolVersion 5) is told its protocol version is unsupported (reason 132), and is closed', async () => {
    for (const clientId of [clientIdFor(nextMac()), 'backend-v5']) {
      const client = mqttConnect(t.mqttUrl, { protocolVersion: 5, clientId, reconnectPeriod: 0, connectTimeout: 30_000 });
      cleanup.push(() => client.end(true));
      const closed = new Promise<void>((resolve) => client.once('close', resolve));
      const failed = new Promise<Error>((resolve) => client.once('error', resolve));
      const err = await withTimeout(failed, 30_000, `${clientId}: mqtt.js to report the refusal`);
      expect(err, clientId).toBeInstanceOf(ErrorWithReasonCode);
      expect((err as ErrorWithReasonCode).code, clientId).toBe(132);
      expect(err.message, clientId).toBe('Connection refused: Unsupported Protocol Version');
      await withTimeout(closed, 30_000, `${clientId}: the connection to close`);
      expect(client.connected).toBe(false);
    }
  });

  it('a zero-length client id: never a device; with clean session 0 identifier rejected (2) for anyone [MQTT-3.1.3-7, -8]', async () => {
    const before = await protocolErrors();
    // clean 0: code 2 whatever the credentials; clean 1: not a device, so the broker's answer (5 without an API key).
    const cases: Array<[number, string[], number]> = [
      [0x00, [], 2],
      [0xc0, ['backend', TEST_API_KEY], 2],
      [0x02, [], 5],
    ];
    for (const [flags, fields, code] of cases) {
      const c = await open();
      c.sendBytes(rawConnect('', flags, fields));
      expect((await c.nextOf('connack')).returnCode).toBe(code);
      await withTimeout(c.closed.promise, 30_000, 'the refused client to be closed');
    }
    expect(await protocolErrors()).toBe(before + 2);
    // A backend with an API key and clean session 1 is served under an id the broker gives it (libmosquitto's default).
    const keyed = await open();
    keyed.sendBytes(rawConnect('', 0xc2, ['backend', TEST_API_KEY]));
    expect((await keyed.nextOf('connack')).returnCode).toBe(0);
  });

  it('closes a QoS 1 PUBLISH, a SUBSCRIBE or an UNSUBSCRIBE with packet id 0 [MQTT-2.3.1-1]', async () => {
    const before = await protocolErrors();
    const packets: Packet[] = [
      { cmd: 'publish', topic: 'device-server', qos: 1, messageId: 0, payload: Buffer.from('{}'), retain: false, dup: false },
      { cmd: 'subscribe', messageId: 0, subscriptions: [{ topic: 'devices/p2p/x', qos: 0 }] },
      { cmd: 'unsubscribe', messageId: 0, unsubscriptions: ['devices/p2p/x'] },
    ];
    for (const p of packets) {
      const c = await device();
      c.sendBytes(Buffer.concat([gen(p), gen({ cmd: 'pingreq' })]));
      await withTimeout(c.closed.promise, 30_000, `a ${p.cmd} with packet id 0 to close the socket`);
      // Only the session's own pushes (its MCP initialize) came back: no acknowledgement, no PINGRESP.
      const cmds = new Set<string>();
      while (c.packets.size > 0) cmds.add((await c.packets.next()).cmd);
      expect([...cmds].filter((cmd) => cmd !== 'publish')).toEqual([]);
    }
    expect(await protocolErrors()).toBe(before + 3);
  });

  it('closes and counts a packet only a server sends, a second CONNECT, and AUTH; ignores acknowledgements of what it never sent', async () => {
    const before = await protocolErrors();
    const serverOnly: Buffer[] = [
      gen({ cmd: 'connack', returnCode: 0, sessionPresent: false }),
      gen({ cmd: 'suback', messageId: 1, granted: [0] }),
      Buffer.from([0xb0, 0x02, 0x00, 0x01]),
      gen({ cmd: 'pingresp' }),
      gen({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: true, keepalive: 60, clientId: clientIdFor(nextMac()) }),
      Buffer.from([0xf0, 0x00]),
    ];
    for (const bytes of serverOnly) {
      const c = await device();
      c.sendBytes(bytes);
      await withTimeout(c.closed.promise, 30_000, `packet 0x${bytes[0]!.toString(16)} to close the socket`);
    }
    expect(await protocolErrors()).toBe(before + serverOnly.length);

    const c = await device();
    for (const cmd of ['puback', 'pubrec', 'pubcomp', 'pubrel'] as const) c.send({ cmd, messageId: 9 } as Packet);
    c.send({ cmd: 'pingreq' });
    await c.nextOf('pingresp');
  });

  it('closes and counts a packet before CONNECT', async () => {
    const before = await protocolErrors();
    const c = await open();
    c.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: '#', qos: 0 }] });
    await closedSilently(c, 'a SUBSCRIBE before CONNECT to close the socket');
    expect(await protocolErrors()).toBe(before + 1);
  });

  it("never publishes a device's will, to a backend reading every event", async () => {
    const backend = await open();
    backend.send({
      cmd: 'connect',
      protocolId: 'MQTT',
      protocolVersion: 4,
      clean: true,
      keepalive: 60,
      clientId: 'backend-will',
      username: 'b',
      password: Buffer.from(TEST_API_KEY),
    });
    expect((await backend.nextOf('connack')).returnCode).toBe(0);
    backend.send({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: 'voxgate/events/#', qos: 0 }] });
    await backend.nextOf('suback');
    const m = nextMac();
    const online = t.nextEvent('device.online', deviceIdOf(m));
    const c = await open();
    c.sendBytes(rawConnect(clientIdFor(m), 0x02 | 0x04 | 0x08 | 0x20, ['voxgate/events/will/x', 'the will']));
    expect((await c.nextOf('connack')).returnCode).toBe(0);
    await online;
    c.destroy();
    // The offline event is published after the socket's close was handled: a will would have come before it.
    let p = await backend.nextOf('publish');
    while (!p.topic.startsWith(`voxgate/events/${deviceIdOf(m)}/device.offline`)) {
      expect(p.topic).not.toBe('voxgate/events/will/x');
      p = await backend.nextOf('publish');
    }
  });

  it("a client without the API key cannot take a backend's client id over", async () => {
    const connect = (password?: string) => ({
      cmd: 'connect' as const,
      protocolId: 'MQTT' as const,
      protocolVersion: 4 as const,
      clean: true,
      keepalive: 60,
      clientId: 'backend-taken',
      ...(password === undefined ? {} : { username: 'b', password: Buffer.from(password) }),
    });
    const backend = await open();
    backend.send(connect(TEST_API_KEY));
    expect((await backend.nextOf('connack')).returnCode).toBe(0);
    for (const password of [undefined, 'wrong']) {
      const attacker = await open();
      attacker.send(connect(password));
      expect((await attacker.nextOf('connack')).returnCode).toBe(5);
    }
    backend.send({ cmd: 'pingreq' });
    await backend.nextOf('pingresp');
  });

  it('answers a SUBSCRIBE of several filters with one return code each, in order; wildcards are refused', async () => {
    const m = nextMac();
    const c = await device(m);
    const inbox = `devices/p2p/${m}`;
    c.send({
      cmd: 'subscribe',
      messageId: 5,
      subscriptions: [
        { topic: 'devices/p2p/+', qos: 0 },
        { topic: inbox, qos: 0 },
        { topic: '#', qos: 1 },
        { topic: inbox, qos: 2 },
      ],
    });
    const suback = await c.nextOf('suback');
    expect([suback.messageId, suback.granted]).toEqual([5, [128, 0, 128, 2]]);
  });

  it('closes a device that publishes to device-server with a trailing NUL or invalid UTF-8 in the topic [MQTT-1.5.3]', async () => {
    for (const topic of [Buffer.from('device-server\u0000'), Buffer.concat([Buffer.from('device-server'), Buffer.from([0xff])])]) {
      const c = await device();
      c.sendBytes(publishTo(topic));
      await withTimeout(c.closed.promise, 30_000, 'a bad topic to close the socket');
    }
  });

  it('takes a retained publish as a plain message (nothing is kept), and a DISCONNECT ends reading', async () => {
    const c = await device();
    c.send({ cmd: 'publish', topic: 'device-server', qos: 1, messageId: 3, payload: Buffer.from('{"type":"x"}'), retain: true, dup: false });
    expect((await c.nextOf('puback')).messageId).toBe(3);
    const before = await protocolErrors();
    c.sendBytes(Buffer.concat([gen({ cmd: 'disconnect' }), gen({ cmd: 'pingreq' })]));
    await withTimeout(c.closed.promise, 30_000, 'DISCONNECT to close the socket');
    // What came back arrived before the close: no PINGRESP, the PINGREQ after DISCONNECT was not read.
    expect(c.packets.size).toBe(0);
    expect(await protocolErrors()).toBe(before);
  });

  it('closes a slow CONNECT at the connect deadline, and sockets that never send one', async () => {
    const before = await t.metric('voxgate_connections_refused_total', { reason: 'no_connect' });
    const bytes = gen({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: true, keepalive: 60, clientId: clientIdFor(nextMac()) });
    const slow = await open();
    const silent = await Promise.all(Array.from({ length: 20 }, () => open()));
    // One byte at a time, never the last: the deadline (1 s here) does not move with the bytes. A deadline that did
    // could only fire once the drip had stopped (1 s after its last byte); this one fires while bytes still arrive.
    let i = 0;
    const drip = setInterval(() => i < bytes.length - 1 && !slow.socket.destroyed && slow.sendBytes(bytes.subarray(i, ++i)), 50);
    cleanup.push(() => clearInterval(drip));
    const sentAtClose = slow.closed.promise.then(() => i);
    await withTimeout(slow.closed.promise, 45_000, 'the slow CONNECT to be closed');
    expect(bytes.length).toBeGreaterThan(40); // 40 bytes at 50 ms: the drip outlasts the deadline twice over
    expect(await sentAtClose).toBeLessThan(bytes.length - 1);
    await Promise.all(silent.map((c) => withTimeout(c.closed.promise, 30_000, 'a silent socket to be closed')));
    expect(await t.metric('voxgate_connections_refused_total', { reason: 'no_connect' })).toBe(before + 21);
  });

  it('closes a first packet announcing more than the CONNECT bound at once, a QoS 0 publish included (none is skipped before CONNECT)', async () => {
    const huge = await open();
    huge.sendBytes(Buffer.from([0x10, 0xff, 0xff, 0xff, 0x7f]));
    await closedSilently(huge, 'a 256 MB CONNECT to be closed');
    const pub = await open();
    pub.sendBytes(Buffer.from([0x30, 0xff, 0xff, 0xff, 0x7f, 0x00, 0x01, 0x61]));
    await closedSilently(pub, 'a 256 MB publish before CONNECT to be closed');
  });

  it('answers thousands of packets in one read, and a flood of them pauses its reads: a PINGREQ is answered with a write', async () => {
    const m = nextMac();
    const c = await device(m);
    const paused = () => t.metric('voxgate_device_reads_paused_total', { transport: 'mqtt', budget: 'device' });
    const before = await paused();
    c.sendBytes(Buffer.concat(Array.from({ length: 5000 }, () => gen({ cmd: 'pingreq' }))));
    for (let n = 0; n < 5000; n++) await c.nextOf('pingresp');
    expect(await paused()).toBeGreaterThan(before);
    expect(t.logs.some((l) => l['reason'] === 'frame_rate' && l['deviceId'] === deviceIdOf(m))).toBe(true);
  });

  it('a socket reset mid-packet leaves the device offline', async () => {
    const m = nextMac();
    const c = await device(m);
    c.send({ cmd: 'pingreq' });
    await c.nextOf('pingresp');
    const offline = t.nextEvent('device.offline', deviceIdOf(m));
    c.sendBytes(publishTo(Buffer.from('device-server'), 'x'.repeat(1000)).subarray(0, 500));
    await until(() => c.socket.bytesWritten > 0, 'the half packet to be written');
    c.socket.resetAndDestroy();
    await offline;
  });
});

describe('MQTT device link with device auth on: takeovers need the credentials', () => {
  const SECRET = 'mqtt-hostile-secret-0123456789';
  let t: TestGateway;
  let port: number;
  const cleanup: Array<() => void> = [];
  beforeAll(async () => {
    t = await startTestGateway({ deviceAuth: 'hmac', deviceSecret: SECRET });
    port = Number(new URL(t.mqttUrl).port);
  });
  afterEach(() => {
    for (const f of cleanup.splice(0)) f();
  });
  afterAll(() => t.close());

  it("a takeover with the device's own credentials fails its pending calls at once and closes the old socket", async () => {
    const d = new ReferenceDevice({ deviceId: deviceIdOf(nextMac()) });
    cleanup.push(() => d.terminate());
    const id = clientIdFor(d.deviceId.replace(/:/g, '_'));
    const username = Buffer.from('{"ip":"1.2.3.4"}').toString('base64');
    const password = mqttPassword(SECRET, id, username);
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectMqtt(t.mqttUrl, { clientId: id, username, password });
    await ready;
    d.holdReplies();
    const pending = t.api<{ code: string }>('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 3 } });
    await d.waitForMcp((p) => p['method'] === 'tools/call');
    const next = await RawMqtt.connect(port, { clientId: id, username, password: Buffer.from(password) });
    cleanup.push(() => next.c.destroy());
    expect(next.connack.returnCode).toBe(0);
    const r = await pending;
    expect([r.status, r.body.code]).toEqual([503, 'DEVICE_OFFLINE']);
    await until(() => !d.connected, 'the replaced socket to be closed');
    next.c.send({ cmd: 'pingreq' });
    await next.c.nextOf('pingresp');
    expect(t.gw.registry.get(d.deviceId)?.online).toBe(true);
  });

  it('an attacker with no or wrong credentials gets code 5 and the live device stays', async () => {
    const m = nextMac();
    const id = clientIdFor(m);
    const username = Buffer.from('{"ip":"1.2.3.4"}').toString('base64');
    const live = await RawMqtt.connect(port, { clientId: id, username, password: Buffer.from(mqttPassword(SECRET, id, username)) });
    cleanup.push(() => live.c.destroy());
    expect(live.connack.returnCode).toBe(0);
    for (const creds of [{}, { username, password: Buffer.from('wrong') }, { username: 'other', password: Buffer.from(mqttPassword(SECRET, id, 'other')) }]) {
      const a = await RawMqtt.connect(port, { clientId: id, ...creds });
      cleanup.push(() => a.c.destroy());
      expect(a.connack.returnCode).toBe(5);
    }
    live.c.send({ cmd: 'pingreq' });
    await live.c.nextOf('pingresp');
    expect(t.gw.registry.get(deviceIdOf(m))?.online).toBe(true);
  });
});
