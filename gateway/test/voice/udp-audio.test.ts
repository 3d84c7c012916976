import { createSocket, type Socket } from 'node:dgram';
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { decodeBinaryFrame, encodeBinaryFrame, openUdpPacket, sealUdpPacket } from '@voxgate/protocol';
import { Registry } from 'prom-client';
import pino from 'pino';
import { loadConfig } from '../../src/config.js';
import type { VoiceDevice } from '../../src/devices/voice-hook.js';
import { createVoiceMetrics } from '../../src/voice/metrics.js';
import { fitsDeclaredAudio, opusShape } from '../../src/voice/opus-packet.js';
import type { VoiceSessionHandle } from '../../src/voice/relay.js';
import { REBIND_FAILURES, REBIND_STEP, SEQUENCE_WINDOW, UdpAudio } from '../../src/voice/udp-audio.js';
import { AsyncQueue, until } from '../../../test/support/wait.js';

/**
 * The UDP audio relay against senders on real sockets (issue 20 item 4): the device and an attacker on two
 * ports of one address (one NAT), and on two addresses (127.0.0.1 and 127.0.0.2, both loopback on Linux).
 */
const DEVICE_IP = '127.0.0.2';
/** TOC 0x58: SILK wideband, one 60 ms frame, mono — what the firmware's encoder sends. */
const opus = (i: number) => Buffer.from([0x58, ...Array.from({ length: 40 }, (_, k) => (i * 31 + k) & 0xff)]);

interface Sender {
  socket: Socket;
  port: number;
  send(p: Buffer): void;
  /** Downlink packets that reached this socket. */
  received: AsyncQueue<Buffer>;
}

describe('UDP audio: pinned source, bounded sequence, Opus-shaped payloads', () => {
  const registry = new Registry();
  const metrics = createVoiceMetrics(registry);
  let udp: UdpAudio;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    const config = loadConfig({}, { voice: { udp: { host: '127.0.0.1', port: 0 } } }).voice;
    udp = await UdpAudio.start(config, metrics, pino({ level: 'silent' }));
  });
  afterEach(() => {
    for (const s of sockets.splice(0)) s.close();
  });
  afterAll(() => udp.close());

  const sender = async (address: string): Promise<Sender> => {
    const socket = createSocket('udp4');
    sockets.push(socket);
    await new Promise<void>((resolve) => socket.bind(0, address, resolve));
    const received = new AsyncQueue<Buffer>();
    socket.on('message', (m) => received.push(m));
    return { socket, port: socket.address().port, send: (p) => socket.send(p, udp.port, '127.0.0.1'), received };
  };

  const dropped = async (reason: string) =>
    (await registry.getSingleMetric('voxgate_voice_audio_dropped_total')!.get()).values.find(
      (v) => v.labels['reason'] === reason && v.labels['direction'] === 'up',
    )?.value ?? 0;
  /** Waits until `reason` counts past `before`; how many past it. */
  const counted = async (reason: string, before: number) => {
    await until(async () => (await dropped(reason)) > before, `a drop counted as ${reason}`);
    return (await dropped(reason)) - before;
  };

  /** A voice session of a device whose MQTT link comes from DEVICE_IP; what reaches the voice server, in order. */
  const session = (declared = { channels: 1, frameDurationMs: 60 }) => {
    const upstream = new AsyncQueue<Buffer>();
    const handle: VoiceSessionHandle = {
      deviceId: '02:00:00:00:14:01',
      device: { remoteAddress: DEVICE_IP, localAddress: '127.0.0.1' } as unknown as VoiceDevice,
      sendUpstream: (frame) => upstream.push(frame),
      touch: () => undefined,
    };
    const path = udp.open(handle, declared);
    const hello = path.deviceHello({ type: 'hello', session_id: 's1' } as never) as { udp: { key: string; nonce: string } };
    const key = Buffer.from(hello.udp.key, 'hex');
    const nonce = Buffer.from(hello.udp.nonce, 'hex');
    const packet = (sequence: number, payload = opus(sequence)) => sealUdpPacket(key, nonce, { timestamp: sequence * 60, sequence }, payload);
    /**
     * Sealed with a key of the sender's own: decrypts to random bytes, which pass as Opus about once in a
     * hundred; the test picks, with the real key, forgeries that do not (the odds are for the docs).
     */
    const forged = (sequence: number) => {
      for (;;) {
        const p = sealUdpPacket(randomBytes(16), nonce, { timestamp: 0, sequence }, opus(sequence));
        if (!fitsDeclaredAudio(openUdpPacket(key, p), declared)) return p;
      }
    };
    const payloadOf = async () => {
      const f = decodeBinaryFrame(2, await upstream.next(5000, 'uplink audio'), 4096);
      if (!f.ok) throw new Error('bad frame');
      return f.value.payload;
    };
    const downlink = (i: number) => path.toDevice(encodeBinaryFrame(2, { payload: opus(i), timestampMs: i * 60 }));
    return { path, packet, forged, payloadOf, upstream, downlink };
  };

  it('a second port of the device address: its audio is dropped, it never takes the downlink, and the uplink is not locked', async () => {
    const s = session();
    const device = await sender(DEVICE_IP);
    const intruder = await sender(DEVICE_IP);
    device.send(s.packet(1));
    expect((await s.payloadOf()).equals(opus(1))).toBe(true);

    // The intruder knows the ssrc and the sequence, not the key: payloads decrypt to garbage.
    const jump0 = await dropped('rebind_sequence_jump');
    const garbage0 = await dropped('rebind_not_opus');
    const old0 = await dropped('rebind_old_sequence');
    intruder.send(s.forged(0xfffffff0)); // would lock the uplink if it advanced the sequence
    expect(await counted('rebind_sequence_jump', jump0)).toBe(1);
    for (let i = 0; i < 3; i++) intruder.send(s.forged(2)); // the next sequence, garbage inside
    expect(await counted('rebind_not_opus', garbage0 + 2)).toBe(1);
    intruder.send(s.packet(1)); // a replay of the device's own packet, from the other port
    expect(await counted('rebind_old_sequence', old0)).toBe(1);

    // The device goes on at sequence 2: accepted, so nothing above moved the sequence.
    device.send(s.packet(2));
    expect((await s.payloadOf()).equals(opus(2))).toBe(true);
    // Downlink still goes to the device's port, not the intruder's.
    s.downlink(7);
    const down = await device.received.next(5000, 'downlink at the device');
    expect(down.readUInt32BE(12)).toBe(1);
    expect(s.upstream.size).toBe(0);
    s.path.close();
  });

  it('a packet that decrypts to garbage, from the pinned source, moves neither the sequence nor the pin', async () => {
    const s = session();
    const device = await sender(DEVICE_IP);
    device.send(s.packet(1));
    await s.payloadOf();
    const bad0 = await dropped('not_opus');
    // A payload that is not an Opus packet of the declared audio (stereo flag set), under the right key.
    device.send(s.packet(5, Buffer.from([0x5c, 1, 2, 3])));
    expect(await counted('not_opus', bad0)).toBe(1);
    device.send(s.packet(2));
    expect((await s.payloadOf()).equals(opus(2))).toBe(true);
    s.path.close();
  });

  it('never lets a jump of more than the window through, even from the pinned source', async () => {
    const s = session();
    const device = await sender(DEVICE_IP);
    device.send(s.packet(1));
    await s.payloadOf();
    const jump0 = await dropped('sequence_jump');
    device.send(s.packet(2 + SEQUENCE_WINDOW));
    expect(await counted('sequence_jump', jump0)).toBe(1);
    device.send(s.packet(1 + SEQUENCE_WINDOW)); // exactly the window: a long loss, still taken
    expect((await s.payloadOf()).equals(opus(1 + SEQUENCE_WINDOW))).toBe(true);
    s.path.close();
  });

  it('a NAT rebinding moves the pin after two fully valid packets in a row a bounded step ahead; the old port is then refused', async () => {
    const s = session();
    const before = await sender(DEVICE_IP);
    const after = await sender(DEVICE_IP);
    before.send(s.packet(1));
    await s.payloadOf();
    const far0 = await dropped('rebind_sequence_jump');
    after.send(s.packet(2 + REBIND_STEP)); // valid, but too far for a move
    expect(await counted('rebind_sequence_jump', far0)).toBe(1);
    const pending0 = await dropped('rebind_pending');
    after.send(s.packet(3)); // the device's next packets, from its new mapping: the first is held back
    expect(await counted('rebind_pending', pending0)).toBe(1);
    after.send(s.packet(4)); // the second moves the pin
    expect((await s.payloadOf()).equals(opus(4))).toBe(true);
    s.downlink(1);
    expect((await after.received.next(5000, 'downlink at the new port')).length).toBeGreaterThan(16);
    const old0 = await dropped('rebind_old_sequence');
    before.send(s.packet(2));
    expect(await counted('rebind_old_sequence', old0)).toBe(1);
    s.path.close();
  });

  it('one valid-looking packet from another port cannot take the session; after a move, the former port can take it back', async () => {
    const s = session();
    const device = await sender(DEVICE_IP);
    const intruder = await sender(DEVICE_IP);
    device.send(s.packet(1));
    await s.payloadOf();
    // A forged packet that happened to decrypt to plausible Opus (~1 % of random payloads), well ahead: held back.
    const pending0 = await dropped('rebind_pending');
    intruder.send(s.packet(1 + REBIND_STEP));
    expect(await counted('rebind_pending', pending0)).toBe(1);
    // The device goes on: its packets are taken, the pin did not move, the downlink still reaches it.
    device.send(s.packet(2));
    expect((await s.payloadOf()).equals(opus(2))).toBe(true);
    s.downlink(1);
    expect((await device.received.next(5000, 'downlink at the device')).length).toBeGreaterThan(16);

    // Two such packets in a row (~1 in 10 000 for random payloads) do move it ...
    intruder.send(s.packet(2 + REBIND_STEP - 1));
    await counted('rebind_pending', pending0 + 1);
    intruder.send(s.packet(2 + REBIND_STEP));
    expect((await s.payloadOf()).equals(opus(2 + REBIND_STEP))).toBe(true);
    // ... but the device's own packets behind that sequence are not counted as failed moves (it used to be locked
    // out after REBIND_FAILURES of them), and once past it the device takes its session back.
    const old0 = await dropped('rebind_old_sequence');
    for (let seq = 3; seq <= 2 + REBIND_STEP; seq++) device.send(s.packet(seq));
    expect(await counted('rebind_old_sequence', old0 + REBIND_STEP - 1)).toBe(1);
    device.send(s.packet(3 + REBIND_STEP));
    await counted('rebind_pending', pending0 + 2);
    device.send(s.packet(4 + REBIND_STEP));
    expect((await s.payloadOf()).equals(opus(4 + REBIND_STEP))).toBe(true);
    s.downlink(2);
    const down = await device.received.next(5000, 'downlink back at the device');
    expect(down.readUInt32BE(12)).toBe(2); // our downlink sequence: the second frame sent
    s.path.close();
  });

  it(`after ${REBIND_FAILURES} failed moves from other sources, rebinding is refused for the session; the pinned source goes on`, async () => {
    const s = session();
    const device = await sender(DEVICE_IP);
    const intruder = await sender(DEVICE_IP);
    device.send(s.packet(1));
    await s.payloadOf();
    const f0 = await dropped('rebind_old_sequence');
    for (let i = 0; i < REBIND_FAILURES; i++) intruder.send(s.packet(1));
    expect(await counted('rebind_old_sequence', f0 + REBIND_FAILURES - 1)).toBe(1);
    const r0 = await dropped('rebind_refused');
    intruder.send(s.packet(2)); // even a valid packet
    expect(await counted('rebind_refused', r0)).toBe(1);
    device.send(s.packet(3));
    expect((await s.payloadOf()).equals(opus(3))).toBe(true);
    s.path.close();
  });

  it('another address: dropped whatever it sends, before the device spoke and after', async () => {
    const s = session();
    const stranger = await sender('127.0.0.1');
    const device = await sender(DEVICE_IP);
    const w0 = await dropped('wrong_address');
    stranger.send(s.packet(1)); // even the right key and sequence
    expect(await counted('wrong_address', w0)).toBe(1);
    device.send(s.packet(1));
    expect((await s.payloadOf()).equals(opus(1))).toBe(true);
    stranger.send(s.packet(2));
    expect(await counted('wrong_address', w0 + 1)).toBe(1);
    s.path.close();
  });

  it('before any packet, a stranger cannot pin a sequence far ahead of the device', async () => {
    const s = session();
    const device = await sender(DEVICE_IP);
    const intruder = await sender(DEVICE_IP);
    const j0 = await dropped('sequence_jump');
    intruder.send(s.packet(REBIND_STEP + 1));
    expect(await counted('sequence_jump', j0)).toBe(1);
    device.send(s.packet(1));
    expect((await s.payloadOf()).equals(opus(1))).toBe(true);
    s.path.close();
  });
});

describe('Opus packet shape (RFC 6716 §3)', () => {
  it('accepts what encoders make, refuses broken framing', () => {
    expect(opusShape(Buffer.from([0x58, 1, 2]))).toEqual({ stereo: false, durationMicros: 60_000 });
    expect(opusShape(Buffer.from([0x58]))).toEqual({ stereo: false, durationMicros: 60_000 }); // DTX: the TOC alone
    // CELT 20 ms × 3 frames, code 3 CBR: 6 bytes of frames split in 3
    expect(opusShape(Buffer.from([0xfb, 0x03, 1, 2, 3, 4, 5, 6]))).toEqual({ stereo: false, durationMicros: 60_000 });
    expect(opusShape(Buffer.from([0xfb, 0x03, 1, 2, 3, 4, 5]))).toBeUndefined(); // R6
    expect(opusShape(Buffer.from([0x59, 1]))).toBeUndefined(); // code 1: two frames of one size cannot fill 1 byte (R3)
    expect(opusShape(Buffer.from([0xfb, 0x00]))).toBeUndefined(); // zero frames (R5)
    expect(opusShape(Buffer.from([0xfb, 0x07]))).toBeUndefined(); // 7 × 20 ms > 120 ms (R5)
    expect(opusShape(Buffer.alloc(0))).toBeUndefined();
  });

  it('allocates nothing per packet: one answer, refilled by each call, every check still made', () => {
    const mono = opusShape(Buffer.from([0x58, 1, 2]));
    expect(mono).toEqual({ stereo: false, durationMicros: 60_000 });
    // CELT 20 ms stereo, code 3 VBR: two frames, the first one's length (2) in a byte, then frames of 2 and 3 bytes.
    const stereo = opusShape(Buffer.from([0xff, 0x82, 2, 1, 2, 3, 4, 5]));
    expect(stereo).toBe(mono);
    expect(stereo).toEqual({ stereo: true, durationMicros: 40_000 });
    // A frame length past the end (R7), a two-byte length cut short, code 2's first frame longer than the packet (R4).
    expect(opusShape(Buffer.from([0xff, 0x82, 9, 1, 2]))).toBeUndefined();
    expect(opusShape(Buffer.from([0xff, 0x82, 253]))).toBeUndefined();
    expect(opusShape(Buffer.from([0xfe, 5, 1, 2]))).toBeUndefined();
    // Code 2 with a two-byte first length (253 + 4 × 0) that fits exactly.
    expect(opusShape(Buffer.from([0xfe, 253, 0, ...new Uint8Array(253)]))).toBe(mono);
    expect(mono).toEqual({ stereo: true, durationMicros: 40_000 });
  });

  it('random bytes (what a wrong key decrypts to) pass as 60 ms mono rarely', () => {
    let pass = 0;
    const n = 20_000;
    for (let i = 0; i < n; i++) {
      const s = opusShape(randomBytes(40));
      if (s && !s.stereo && s.durationMicros === 60_000) pass++;
    }
    expect(pass / n).toBeLessThan(0.03);
  });
});
