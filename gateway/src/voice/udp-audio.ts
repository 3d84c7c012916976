import { createSocket, type Socket } from 'node:dgram';
import { randomInt } from 'node:crypto';
import {
  DEFAULT_SERVER_AUDIO,
  buildUdpServerHello,
  decodeBinaryFrame,
  encodeBinaryFrame,
  newUdpSessionKeys,
  openUdpPacket,
  parseUdpHeader,
  sealUdpPacket,
  udpSsrc,
} from '@voxgate/protocol';
import type { Logger } from 'pino';
import type { VoiceMetrics } from './metrics.js';
import type { DeviceAudioPath, UdpAudioFactory, VoiceConfig, VoiceSessionHandle } from './relay.js';

interface Binding {
  ssrc: number;
  key: Buffer;
  nonce: Buffer;
  session: VoiceSessionHandle;
  /** The device's MQTT address: UDP from anywhere else is not this device's (CTR carries no MAC). */
  deviceAddress: string;
  /** Highest uplink sequence accepted: anything not above it is old or replayed. */
  upSequence: number;
  /** Our own downlink sequence (the device drops a sequence below its last). */
  downSequence: number;
  remote?: { address: string; port: number };
}

/**
 * One UDP socket for every MQTT device's voice audio. A packet is routed by its ssrc (fresh per session,
 * carried in the nonce of the server hello), checked for length and sequence, decrypted, and sent to the
 * voice server as binary protocol 2 (timestamp kept); downlink frames are re-encrypted with our own
 * sequence and sent to the address the device's last good packet came from.
 */
export class UdpAudio implements UdpAudioFactory {
  private readonly bindings = new Map<number, Binding>();

  private constructor(
    private readonly socket: Socket,
    readonly port: number,
    private readonly config: VoiceConfig,
    private readonly metrics: VoiceMetrics,
    private readonly log: Logger,
  ) {
    socket.on('message', (packet, rinfo) => {
      try {
        this.onPacket(packet, rinfo.address, rinfo.port);
      } catch (e) {
        // A packet never takes the socket down.
        this.metrics.dropped.inc({ direction: 'up', reason: 'internal' });
        this.log.error({ err: e instanceof Error ? e.message : String(e) }, 'UDP audio packet handler failed');
      }
    });
    socket.on('error', (e) => this.log.warn({ err: e.message }, 'UDP audio socket error'));
  }

  static async start(config: VoiceConfig, metrics: VoiceMetrics, log: Logger): Promise<UdpAudio> {
    const socket = createSocket({ type: config.udp.host.includes(':') ? 'udp6' : 'udp4' });
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(config.udp.port, config.udp.host, () => {
        socket.off('error', reject);
        resolve();
      });
    });
    return new UdpAudio(socket, socket.address().port, config, metrics, log);
  }

  get bindingCount(): number {
    return this.bindings.size;
  }

  open(session: VoiceSessionHandle): DeviceAudioPath {
    let ssrc = randomInt(1, 0xffffffff);
    for (let i = 0; this.bindings.has(ssrc); i++) {
      if (i > 16) throw new Error('no free ssrc');
      ssrc = randomInt(1, 0xffffffff);
    }
    const keys = newUdpSessionKeys(ssrc);
    const device = session.device;
    const b: Binding = { ssrc, ...keys, session, deviceAddress: normalizeAddress(device.remoteAddress), upSequence: 0, downSequence: 0 };
    this.bindings.set(ssrc, b);
    const server = this.config.udp.publicHost ?? (normalizeAddress(device.localAddress ?? '') || '127.0.0.1');
    return {
      transport: 'udp',
      upstreamVersion: 2,
      toDevice: (frame) => this.toDevice(b, frame),
      deviceHello: (up) => buildUdpServerHello(up.session_id, up.audio_params ?? DEFAULT_SERVER_AUDIO, { server, port: this.port, key: b.key, nonce: b.nonce }),
      close: () => {
        if (this.bindings.get(ssrc) === b) this.bindings.delete(ssrc);
      },
    };
  }

  close(): void {
    this.bindings.clear();
    this.socket.close();
  }

  private onPacket(packet: Buffer, address: string, port: number): void {
    const drop = (reason: string) => this.metrics.dropped.inc({ direction: 'up', reason });
    const ssrc = udpSsrc(packet);
    const b = ssrc === undefined ? undefined : this.bindings.get(ssrc);
    if (!b) return drop(ssrc === undefined ? 'too_short' : 'unknown_ssrc');
    const h = parseUdpHeader(packet);
    if (!h.ok) return drop(h.reason);
    if (b.deviceAddress && normalizeAddress(address) !== b.deviceAddress) return drop('wrong_address');
    if (h.value.sequence <= b.upSequence) return drop('old_sequence');
    if (h.value.payloadLength > this.config.maxFrameBytes) return drop('too_large');
    b.upSequence = h.value.sequence;
    b.remote = { address, port };
    const opus = openUdpPacket(b.key, packet);
    b.session.sendUpstream(encodeBinaryFrame(2, { payload: opus, timestampMs: h.value.timestamp }), opus.length);
  }

  private toDevice(b: Binding, frame: Buffer): void {
    const drop = (reason: string) => this.metrics.dropped.inc({ direction: 'down', reason });
    const f = decodeBinaryFrame(2, frame, this.config.maxFrameBytes);
    if (!f.ok) return drop(f.reason);
    if (f.value.type !== 'opus') return drop('not_audio');
    if (!b.remote) return drop('no_remote'); // the device has not sent a packet yet: nowhere to send
    b.session.touch();
    const packet = sealUdpPacket(b.key, b.nonce, { timestamp: f.value.timestampMs, sequence: ++b.downSequence }, f.value.payload);
    this.socket.send(packet, b.remote.port, b.remote.address);
    this.metrics.frames.inc({ direction: 'down' });
    this.metrics.bytes.inc({ direction: 'down' }, f.value.payload.length);
  }
}

/** `::ffff:1.2.3.4` and `1.2.3.4` are the same device. */
function normalizeAddress(a: string): string {
  return a.replace(/^::ffff:/, '');
}
