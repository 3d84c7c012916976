import { decodeBinaryFrame, encodeBinaryFrame, type BinaryProtocolVersion } from '@voxgate/protocol';
import { describe, expect, it } from 'vitest';
import type { DeviceAudioPath } from '../../../../src/voice/relay.js';
import { udpTransport, webSocketTransport, type VoiceLink } from '../../../../src/voice/converse/session/transport.js';

const AUDIO = { format: 'opus', sample_rate: 24_000, channels: 1, frame_duration: 60 } as const;
const opus = Uint8Array.of(0x58, 1, 2, 3);

function link(o: { buffered?: number; accepts?: boolean } = {}) {
  const text: string[] = [];
  const binary: Buffer[] = [];
  const l: VoiceLink = {
    transport: 'websocket',
    send: (t) => (text.push(t), true),
    sendBinary: (b) => (binary.push(b), o.accepts ?? true),
    bufferedBytes: () => o.buffered ?? 0,
    close: () => undefined,
  };
  return { l, text, binary };
}

function drops() {
  const seen: string[] = [];
  return { seen, d: { drop: (direction: 'up' | 'down', reason: string) => void seen.push(`${direction}:${reason}`) } };
}

/** How a conversation's audio and JSON reach one device, per transport, and what it makes of the device's frames. */
describe('conversation transports', () => {
  it.each([1, 2, 3] as BinaryProtocolVersion[])('WebSocket, binary protocol %i: hello, frames both ways in that framing', (version) => {
    const { l, text, binary } = link();
    const { d, seen } = drops();
    const t = webSocketTransport(l, version, 1024, 64 * 1024, d);
    expect(t.hello('sess-1', AUDIO)).toEqual({ type: 'hello', version, transport: 'websocket', session_id: 'sess-1', audio_params: AUDIO });
    t.json({ type: 'tts', state: 'start' });
    expect(JSON.parse(text[0]!)).toEqual({ type: 'tts', state: 'start' });
    t.frame(opus, 120);
    const down = decodeBinaryFrame(version, binary[0]!, 1024);
    expect(down.ok && [...down.value.payload]).toEqual([...opus]);
    // Only protocol 2's header carries a timestamp (3 has type and size, 1 is the bare Opus packet).
    expect(down.ok && down.value.timestampMs).toBe(version === 2 ? 120 : 0);
    const up = t.uplink(encodeBinaryFrame(version, { payload: opus, timestampMs: 60 }));
    expect(up && [...up]).toEqual([...opus]);
    expect(seen).toEqual([]);
  });

  it('WebSocket: drops audio (counted) rather than queue it behind a backed-up socket, or to a closed session', () => {
    const backed = link({ buffered: 70_000 });
    const a = drops();
    webSocketTransport(backed.l, 2, 1024, 64 * 1024, a.d).frame(opus, 0);
    expect(backed.binary).toEqual([]);
    const gone = link({ accepts: false });
    const b = drops();
    webSocketTransport(gone.l, 2, 1024, 64 * 1024, b.d).frame(opus, 0);
    expect([...a.seen, ...b.seen]).toEqual(['down:backpressure', 'down:no_session']);
  });

  it('WebSocket: refuses malformed and oversized uplink frames (counted), and takes a JSON frame as not audio', () => {
    const { l } = link();
    const { d, seen } = drops();
    const t = webSocketTransport(l, 2, 8, 64 * 1024, d);
    expect(t.uplink(Buffer.from([0, 2]))).toBeUndefined();
    expect(t.uplink(encodeBinaryFrame(2, { payload: new Uint8Array(9) }))).toBeUndefined();
    const header = encodeBinaryFrame(2, { payload: opus });
    header.writeUInt32BE(999, 12);
    expect(t.uplink(header)).toBeUndefined();
    expect(t.uplink(encodeBinaryFrame(2, { type: 'json', payload: Buffer.from('{}') }))).toBeUndefined();
    expect(seen).toEqual(['up:too_short', 'up:too_large', 'up:bad_length']);
  });

  it('MQTT + UDP: JSON over MQTT, audio through the UDP path in protocol 2, the hello from the binding', () => {
    const { l, text } = link();
    const toDevice: Buffer[] = [];
    let closed = false;
    const path: DeviceAudioPath = {
      transport: 'udp',
      upstreamVersion: 2,
      toDevice: (f) => void toDevice.push(f),
      deviceHello: (up) => ({ ...up, transport: 'udp', udp: { server: '127.0.0.1', port: 9, key: 'k', nonce: 'n' } }),
      close: () => void (closed = true),
    };
    const { d, seen } = drops();
    const t = udpTransport(l, path, 1024, d);
    expect(t.hello('sess-2', AUDIO)).toMatchObject({ type: 'hello', session_id: 'sess-2', audio_params: AUDIO, transport: 'udp', udp: { port: 9 } });
    t.json({ type: 'stt', text: 'hi' });
    expect(JSON.parse(text[0]!)).toEqual({ type: 'stt', text: 'hi' });
    t.frame(opus, 60);
    const f = decodeBinaryFrame(2, toDevice[0]!, 1024);
    expect(f.ok && [f.value.timestampMs, [...f.value.payload]]).toEqual([60, [...opus]]);
    expect(t.uplink(Buffer.from([1]))).toBeUndefined();
    expect(seen).toEqual(['up:too_short']);
    t.close();
    expect(closed).toBe(true);
  });
});
