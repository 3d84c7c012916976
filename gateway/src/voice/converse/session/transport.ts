import { decodeBinaryFrame, encodeBinaryFrame, type AudioParams, type BinaryProtocolVersion } from '@voxgate/protocol';
import type { DeviceAudioPath } from '../../relay.js';

/** What a conversation needs of the device's link (a narrow slice of DeviceSession's DeviceLink). */
export interface VoiceLink {
  readonly transport: 'websocket' | 'mqtt';
  send(text: string): boolean;
  sendBinary?(data: Buffer): boolean;
  bufferedBytes?(): number;
  close(code: number, reason: string): void;
}

/** How a conversation's audio and JSON reach one device, and how its uplink frames are read. */
export interface ConverseTransport {
  readonly kind: 'websocket' | 'udp';
  /** The server hello for this transport (session id and downlink audio_params). */
  hello(sessionId: string, audio: AudioParams): object;
  json(message: object): void;
  frame(opus: Uint8Array, timestampMs: number): void;
  /** One uplink binary message → its Opus payload (undefined: not audio, or malformed). */
  uplink(data: Buffer): Uint8Array | undefined;
  close(): void;
}

export interface TransportDrops {
  drop(direction: 'up' | 'down', reason: string): void;
}

/**
 * WebSocket: binary protocol 1, 2 or 3 as the device's hello said (the firmware frames its uplink and reads
 * our downlink the same way). A socket backed up beyond `maxBufferedBytes` drops audio rather than queue it.
 */
export function webSocketTransport(
  link: VoiceLink,
  version: BinaryProtocolVersion,
  maxFrameBytes: number,
  maxBufferedBytes: number,
  drops: TransportDrops,
): ConverseTransport {
  return {
    kind: 'websocket',
    hello: (sessionId, audio) => ({ type: 'hello', version, transport: 'websocket', session_id: sessionId, audio_params: audio }),
    json: (m) => void link.send(JSON.stringify(m)),
    frame(opus, timestampMs) {
      if (!link.sendBinary || (link.bufferedBytes?.() ?? 0) > maxBufferedBytes) return drops.drop('down', 'backpressure');
      if (!link.sendBinary(encodeBinaryFrame(version, { payload: opus, timestampMs }))) drops.drop('down', 'no_session');
    },
    uplink(data) {
      const f = decodeBinaryFrame(version, data, maxFrameBytes);
      if (!f.ok) return void drops.drop('up', f.reason);
      return f.value.type === 'opus' ? f.value.payload : undefined;
    },
    close() {},
  };
}

/**
 * MQTT + UDP: JSON over the device's MQTT link, audio through the relay's UDP socket (voice/udp-audio.ts,
 * AES-128-CTR, its sequence and address rules). The binding speaks binary protocol 2 both ways.
 */
export function udpTransport(link: VoiceLink, path: DeviceAudioPath, maxFrameBytes: number, drops: TransportDrops): ConverseTransport {
  return {
    kind: 'udp',
    hello: (sessionId, audio) => path.deviceHello({ type: 'hello', session_id: sessionId, audio_params: audio }),
    json: (m) => void link.send(JSON.stringify(m)),
    frame: (opus, timestampMs) => path.toDevice(encodeBinaryFrame(2, { payload: opus, timestampMs })),
    uplink(data) {
      const f = decodeBinaryFrame(2, data, maxFrameBytes);
      if (!f.ok) return void drops.drop('up', f.reason);
      return f.value.type === 'opus' ? f.value.payload : undefined;
    },
    close: () => path.close(),
  };
}
