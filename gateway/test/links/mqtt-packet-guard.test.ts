import { describe, expect, it } from 'vitest';
import { mqttFrame } from '../../../test/support/raw-mqtt.js';
import { MqttPacketGuard, PacketTooLargeError, type OversizedPublish } from '../../src/links/mqtt-packet-guard.js';

/** An MQTT 3.1.1 PUBLISH: fixed header (type 3, QoS in bits 1-2), topic, packet id when QoS > 0, payload. */
function publish(topic: string, payload: Buffer, qos = 0): Buffer {
  const t = Buffer.from(topic);
  const body = Buffer.concat([Buffer.from([t.length >> 8, t.length & 0xff]), t, qos > 0 ? Buffer.from([0, 1]) : Buffer.alloc(0), payload]);
  return mqttFrame(0x30 | (qos << 1), body);
}

/** `input` through the guard in chunks of `chunk` bytes: what passed, the publishes skipped, and the verdict if one came. */
function run(limit: number, input: Buffer, chunk = 1000): { out: Buffer; oversized: OversizedPublish[]; error?: unknown } {
  const oversized: OversizedPublish[] = [];
  const guard = new MqttPacketGuard(limit, (o) => oversized.push(o));
  const parts: Buffer[] = [];
  for (let i = 0; i < input.length; i += chunk) {
    const passed = guard.pass(input.subarray(i, i + chunk));
    if (passed instanceof Error) return { out: Buffer.concat(parts), oversized, error: passed };
    if (passed) parts.push(passed);
  }
  return { out: Buffer.concat(parts), oversized };
}

describe('MQTT packet guard', () => {
  it('skips an oversized QoS 0 publish (reporting its topic and payload start) and passes the packets around it intact', () => {
    const small1 = publish('device-server', Buffer.from('{"a":1}'));
    const big = publish('device-server', Buffer.from(`{"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":7,"result":"${'z'.repeat(5000)}"}}`));
    const small2 = publish('device-server', Buffer.from('{"b":2}'));
    const r = run(1024, Buffer.concat([small1, big, small2]), 333);
    expect(r.error).toBeUndefined();
    expect(r.out.equals(Buffer.concat([small1, small2]))).toBe(true);
    expect(r.oversized).toHaveLength(1);
    expect(r.oversized[0]).toMatchObject({ bytes: big.length, limit: 1024, topic: 'device-server' });
    expect(r.oversized[0]!.payloadHead.startsWith('{"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":7')).toBe(true);
  });

  it('fails the stream on an oversized QoS 1 publish (it would expect an acknowledgement)', () => {
    const r = run(1024, publish('device-server', Buffer.alloc(4000, 0x61), 1));
    expect(r.error).toBeInstanceOf(PacketTooLargeError);
  });

  it('passes exactly the packets under the limit, however the stream is cut (pass, chunk by chunk)', () => {
    // A fixed pseudo-random sequence: packets of every size around the limit and the 1- and 2-byte length forms,
    // cut at random points (headers split across chunks included).
    let seed = 7;
    const rand = (n: number) => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) % n;
    const limit = 300;
    for (let round = 0; round < 40; round++) {
      const packets = Array.from({ length: 30 }, () => (rand(5) === 0 ? Buffer.from([0xc0, 0]) : publish('device-server', Buffer.alloc(rand(600), 0x61))));
      const input = Buffer.concat(packets);
      const expected = Buffer.concat(packets.filter((p) => p.length <= limit));
      let skipped = 0;
      const guard = new MqttPacketGuard(limit, () => skipped++);
      const parts: Buffer[] = [];
      for (let i = 0; i < input.length;) {
        const n = 1 + rand(rand(2) ? 8 : 900);
        const passed = guard.pass(input.subarray(i, i + n));
        expect(passed).not.toBeInstanceOf(Error);
        if (passed instanceof Buffer) parts.push(passed);
        i += n;
      }
      expect(Buffer.concat(parts).equals(expected)).toBe(true);
      expect(skipped).toBe(packets.length - packets.filter((p) => p.length <= limit).length);
    }
  });

  it('holds the first packet of a connection (its CONNECT) to its own limit, refused on its length alone, even as a QoS 0 publish', () => {
    const first = (p: Buffer) => new MqttPacketGuard(1000, () => undefined, 100).pass(p);
    const over = first(mqttFrame(0x10, Buffer.alloc(99)));
    expect(over).toBeInstanceOf(PacketTooLargeError);
    expect((over as PacketTooLargeError).message).toBe('first MQTT packet (CONNECT) of 101 bytes exceeds the 100-byte limit');
    // Its fixed header alone is enough: nothing of the body is waited for, or held.
    expect(first(Buffer.from([0x10, 0xe0, 0x0c]))).toBeInstanceOf(PacketTooLargeError);
    expect(first(publish('device-server', Buffer.alloc(200)))).toBeInstanceOf(PacketTooLargeError);
    // At the limit it passes, and the packets after it are held to the packet limit only.
    const guard = new MqttPacketGuard(1000, () => undefined, 100);
    const connect = mqttFrame(0x10, Buffer.alloc(98));
    const later = publish('device-server', Buffer.alloc(900));
    const passed = guard.pass(Buffer.concat([connect, later]));
    expect(Buffer.isBuffer(passed) && passed.equals(Buffer.concat([connect, later]))).toBe(true);
  });
});
