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
import { fitsDeclaredAudio, type DeclaredAudio } from './opus-packet.js';
import type { DeviceAudioPath, UdpAudioFactory, VoiceConfig, VoiceSessionHandle } from './relay.js';

/**
 * How far past the last accepted uplink sequence a packet may be: 512 frames (about 30 s at 60 ms). A
 * packet beyond is dropped, so one forged packet cannot push the sequence out of the device's reach.
 */
export const SEQUENCE_WINDOW = 512;
/** How far past the last accepted sequence a packet from a new source port (a NAT rebinding) may be. */
export const REBIND_STEP = 32;
/** Packets from other sources that failed to rebind, per session, before rebinding is refused for good. */
export const REBIND_FAILURES = 16;

interface Binding {
  ssrc: number;
  key: Buffer;
  nonce: Buffer;
  session: VoiceSessionHandle;
  /** The device's MQTT address: UDP from anywhere else is not this device's (CTR carries no MAC). */
  deviceAddress: string;
  /** What the device's hello declared: a decrypted payload must be an Opus packet of that shape. */
  declared: DeclaredAudio;
  /** Highest uplink sequence accepted: anything not above it is old or replayed. */
  upSequence: number;
  /** Our own downlink sequence (the device drops a sequence below its last). */
  downSequence: number;
  /** Pinned by the first packet accepted: uplink is taken, and downlink sent, only there (see onPacket). */
  remote?: { address: string; port: number };
  /** Packets from another source that did not rebind (see REBIND_FAILURES). */
  rebindFailures: number;
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

  open(session: VoiceSessionHandle, declared: DeclaredAudio = {}): DeviceAudioPath {
    let ssrc = randomInt(1, 0xffffffff);
    for (let i = 0; this.bindings.has(ssrc); i++) {
      if (i > 16) throw new Error('no free ssrc');
      ssrc = randomInt(1, 0xffffffff);
    }
    const keys = newUdpSessionKeys(ssrc);
    const device = session.device;
    const b: Binding = { ssrc, ...keys, session, deviceAddress: normalizeAddress(device.remoteAddress), declared, upSequence: 0, downSequence: 0, rebindFailures: 0 };
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

  /**
   * The firmware's packets carry no MAC (AES-128-CTR only), so a packet is the device's only when
   * everything the protocol allows checking holds: a live ssrc; the header bytes the device copies from
   * our nonce; the device's MQTT address; a sequence above the last accepted and at most SEQUENCE_WINDOW
   * past it; a payload that decrypts to an Opus packet of the declared audio. The first such packet pins
   * the source address and port. A packet from another port (a NAT rebinding, or another host behind the
   * same NAT) moves the pin only when it passes every check with a sequence at most REBIND_STEP past the
   * last; after REBIND_FAILURES others, rebinding is refused for the session. A packet that fails any
   * check changes nothing (sequence, pin) and is counted by reason.
   */
  private onPacket(packet: Buffer, address: string, port: number): void {
    const drop = (reason: string) => this.metrics.dropped.inc({ direction: 'up', reason });
    const ssrc = udpSsrc(packet);
    const b = ssrc === undefined ? undefined : this.bindings.get(ssrc);
    if (!b) return drop(ssrc === undefined ? 'too_short' : 'unknown_ssrc');
    const h = parseUdpHeader(packet);
    if (!h.ok) return drop(h.reason);
    if (h.value.flags !== b.nonce[1]) return drop('bad_flags');
    if (b.deviceAddress && normalizeAddress(address) !== b.deviceAddress) return drop('wrong_address');
    const pinned = b.remote === undefined || (b.remote.address === address && b.remote.port === port);
    if (!pinned && b.rebindFailures >= REBIND_FAILURES) return drop('rebind_refused');
    // A source that is not the pinned one: any failure below counts against rebinding.
    const refuse = (reason: string) => {
      if (!pinned) b.rebindFailures++;
      return drop(pinned ? reason : `rebind_${reason}`);
    };
    if (h.value.sequence <= b.upSequence) return refuse('old_sequence');
    // Until a source is pinned, the first packets are near sequence 1: a stranger cannot pin a sequence far ahead.
    if (h.value.sequence - b.upSequence > (pinned && b.remote ? SEQUENCE_WINDOW : REBIND_STEP)) return refuse('sequence_jump');
    if (h.value.payloadLength > this.config.maxFrameBytes) return refuse('too_large');
    const opus = openUdpPacket(b.key, packet);
    if (!fitsDeclaredAudio(opus, b.declared)) return refuse('not_opus');
    if (!pinned) this.log.info({ deviceId: b.session.deviceId, from: b.remote, to: { address, port } }, 'UDP audio source moved (NAT rebinding)');
    b.upSequence = h.value.sequence;
    b.remote = { address, port };
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
