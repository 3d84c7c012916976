import { createSocket, type Socket } from 'node:dgram';
import { randomInt } from 'node:crypto';
import {
  BINARY_V2_HEADER_BYTES,
  DEFAULT_SERVER_AUDIO,
  UDP_HEADER_BYTES,
  UdpCrypter,
  buildUdpServerHello,
  decodeUpstreamAudioFrame,
  newUdpSessionKeys,
  parseUdpHeader,
  udpSsrc,
  writeBinaryV2Header,
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
  /** AES-128-CTR with this session's key, its key schedule done once (not a cipher per packet). */
  crypter: UdpCrypter;
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
  remote?: Source;
  /** A source that sent one valid packet from elsewhere: its next valid packet moves the pin there. */
  candidate?: Source & { sequence: number };
  /** The source the pin last moved away from: its packets count no failure, and it may move the pin back. */
  former?: Source;
  /** Packets from another source that did not rebind (see REBIND_FAILURES). */
  rebindFailures: number;
}

interface Source {
  address: string;
  port: number;
}

const at = (s: Source | undefined, address: string, port: number): boolean => s !== undefined && s.address === address && s.port === port;

/**
 * One UDP socket for every MQTT device's voice audio. A packet is routed by its ssrc (fresh per session,
 * carried in the nonce of the server hello), checked for length and sequence, decrypted, and sent to the
 * voice server as binary protocol 2 (timestamp kept); downlink frames (16-byte header: protocol 2, or the UDP layout
 * xiaozhi-esp32-server writes) are re-encrypted with our own sequence and sent to the address the device's last good
 * packet came from.
 */
export class UdpAudio implements UdpAudioFactory {
  private readonly bindings = new Map<number, Binding>();
  private readonly relayedDown: VoiceMetrics['relayed']['down'];

  private constructor(
    private readonly socket: Socket,
    readonly port: number,
    private readonly config: VoiceConfig,
    private readonly metrics: VoiceMetrics,
    private readonly log: Logger,
  ) {
    this.relayedDown = metrics.relayed.down;
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
    sizeReceiveBuffer(socket, config.maxSessions, log);
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
    const b: Binding = {
      ssrc,
      ...keys,
      crypter: new UdpCrypter(keys.key),
      session,
      deviceAddress: normalizeAddress(device.remoteAddress),
      declared,
      upSequence: 0,
      downSequence: 0,
      rebindFailures: 0,
    };
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
   * same NAT) moves the pin only when two in a row from that port pass every check, each at most REBIND_STEP
   * past the last accepted sequence: the first is held back (`rebind_pending`), the second moves the pin. One
   * forged packet that happened to decrypt to plausible Opus (about 1 % of random payloads do) used to move
   * the pin, and the device's own packets, behind the forger's sequence, then counted as failed moves until
   * rebinding was refused: the device was locked out. Failures from other sources count against rebinding
   * (after REBIND_FAILURES it is refused for the session), except those of the source the pin last moved away
   * from, which may move it back. A packet that fails any check changes nothing (sequence, pin) and is
   * counted by reason.
   */
  private onPacket(packet: Buffer, address: string, port: number): void {
    const ssrc = udpSsrc(packet);
    const b = ssrc === undefined ? undefined : this.bindings.get(ssrc);
    if (!b) return this.dropUp(ssrc === undefined ? 'too_short' : 'unknown_ssrc');
    const h = parseUdpHeader(packet);
    if (!h.ok) return this.dropUp(h.reason);
    if (h.value.flags !== b.nonce[1]) return this.dropUp('bad_flags');
    // The same string as the device's MQTT address (the usual case) needs no normalising.
    if (b.deviceAddress && address !== b.deviceAddress && normalizeAddress(address) !== b.deviceAddress) return this.dropUp('wrong_address');
    const remote = b.remote;
    const pinned = remote === undefined || at(remote, address, port);
    if (!pinned && !at(b.former, address, port) && b.rebindFailures >= REBIND_FAILURES) return this.dropUp('rebind_refused');
    // A source that is not the pinned one: any failure below counts against rebinding.
    if (h.value.sequence <= b.upSequence) return this.refuse(b, pinned, address, port, 'old_sequence');
    // Until a source is pinned, the first packets are near sequence 1: a stranger cannot pin a sequence far ahead.
    if (h.value.sequence - b.upSequence > (pinned && remote ? SEQUENCE_WINDOW : REBIND_STEP)) return this.refuse(b, pinned, address, port, 'sequence_jump');
    if (h.value.payloadLength > this.config.maxFrameBytes) return this.refuse(b, pinned, address, port, 'too_large');
    // Decrypted straight into the protocol-2 frame that goes upstream: one buffer per packet, no copy.
    const frame = Buffer.allocUnsafe(BINARY_V2_HEADER_BYTES + packet.length - UDP_HEADER_BYTES);
    b.crypter.openInto(packet, frame, BINARY_V2_HEADER_BYTES);
    const opus = frame.subarray(BINARY_V2_HEADER_BYTES);
    if (!fitsDeclaredAudio(opus, b.declared)) return this.refuse(b, pinned, address, port, 'not_opus');
    if (!pinned) {
      const c = b.candidate;
      if (!at(c, address, port) || h.value.sequence <= c!.sequence) {
        b.candidate = { address, port, sequence: h.value.sequence };
        return this.dropUp('rebind_pending');
      }
      this.log.info({ deviceId: b.session.deviceId, from: remote, to: { address, port } }, 'UDP audio source moved (NAT rebinding)');
      b.former = remote;
      b.candidate = undefined;
      b.remote = { address, port };
    } else if (remote === undefined) b.remote = { address, port };
    b.upSequence = h.value.sequence;
    writeBinaryV2Header(frame, 'opus', h.value.timestamp, opus.length);
    b.session.sendUpstream(frame, opus.length);
  }

  private dropUp(reason: string): void {
    this.metrics.dropped.inc({ direction: 'up', reason });
  }

  private refuse(b: Binding, pinned: boolean, address: string, port: number, reason: string): void {
    if (!pinned) {
      // A candidate's failure ends its move; the former pin's failures are the device catching up, not a stranger's.
      if (at(b.candidate, address, port)) b.candidate = undefined;
      if (!at(b.former, address, port)) b.rebindFailures++;
    }
    this.dropUp(pinned ? reason : `rebind_${reason}`);
  }

  private toDevice(b: Binding, frame: Buffer): void {
    const f = decodeUpstreamAudioFrame(frame, this.config.maxFrameBytes);
    if (!f.ok) return this.dropDown(f.reason);
    if (f.value.type !== 'opus') return this.dropDown('not_audio');
    if (!b.remote) return this.dropDown('no_remote'); // the device has not sent a packet yet: nowhere to send
    b.session.touch();
    const packet = b.crypter.seal(b.nonce, { timestamp: f.value.timestampMs, sequence: ++b.downSequence }, f.value.payload);
    this.socket.send(packet, b.remote.port, b.remote.address);
    this.relayedDown.frames.inc();
    this.relayedDown.bytes.inc(f.value.payload.length);
  }

  private dropDown(reason: string): void {
    this.metrics.dropped.inc({ direction: 'down', reason });
  }
}

/** Kernel receive buffer per session the socket may carry: ~8 packets of a 60 ms stream with the kernel's overhead. */
const RECEIVE_BYTES_PER_SESSION = 8 * 1024;
const RECEIVE_BYTES_MIN = 256 * 1024;
const RECEIVE_BYTES_MAX = 16 * 1024 * 1024;

/**
 * Size the socket's receive buffer for the sessions it may carry: with the default (~208 KiB) a few hundred
 * streaming devices overflowed it during one event-loop pause (a full GC), and the kernel dropped their packets.
 * The kernel caps what it grants at net.core.rmem_max; what was granted is logged.
 */
function sizeReceiveBuffer(socket: Socket, maxSessions: number, log: Logger): void {
  const wanted = Math.min(RECEIVE_BYTES_MAX, Math.max(RECEIVE_BYTES_MIN, maxSessions * RECEIVE_BYTES_PER_SESSION));
  try {
    socket.setRecvBufferSize(wanted);
    log.debug({ wanted, granted: socket.getRecvBufferSize() }, 'UDP audio receive buffer sized');
  } catch (e) {
    log.warn({ wanted, err: e instanceof Error ? e.message : String(e) }, 'UDP audio receive buffer left at the default');
  }
}

/** `::ffff:1.2.3.4` and `1.2.3.4` are the same device. */
function normalizeAddress(a: string): string {
  return a.replace(/^::ffff:/, '');
}
