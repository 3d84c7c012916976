import type { Socket } from 'node:net';
import { DEVICE_PUBLISH_TOPIC } from '@voxgate/protocol';
import mqttPacket, { type IConnectPacket, type Packet } from 'mqtt-packet';
import type { DeviceLink } from '../devices/link.js';
import type { UnreadCheck } from './mqtt-connection.js';
import { connectProtocolLevel, MAX_CONNECT_BYTES, MqttFramingError, MqttPacketGuard, type OversizedPublish } from './mqtt-packet-guard.js';
import { leanParserList } from './mqtt-parser-buffer.js';

/** CONNACK return codes (MQTT 3.1.1, 3.2.2.3). */
const CONNACK_UNACCEPTABLE_PROTOCOL = 1;
const CONNACK_IDENTIFIER_REJECTED = 2;
/** MQTT 3.1 limits a client id to 23 characters (aedes refuses a longer one the same way). */
const MQTT31_MAX_CLIENT_ID = 23;
const SUBACK_FAILURE = 0x80;
const PINGRESP = Buffer.from([0xd0, 0x00]);
const PUBACK = 0x40;
const UNSUBACK = 0xb0;
/** An acknowledgement that carries only the packet id it answers (MQTT 3.1.1 PUBACK, UNSUBACK). */
const ack = (type: number, messageId: number): Buffer => Buffer.from([type, 0x02, messageId >> 8, messageId & 0xff]);
/** PINGREQ, SUBSCRIBE and UNSUBSCRIBE packets a device may send per keepalive period before they spend from its read budget. */
const FREE_CONTROL_PACKETS = 16;

/** A clean session always: nothing is kept for a device between connections (sessionPresent 0). */
const connack = (returnCode: number): Buffer => Buffer.from([0x20, 0x02, 0x00, returnCode]);
/**
 * The MQTT 5 refusal of an MQTT 5 CONNECT (MQTT 5.0 3.2.2.2, 4.13): acknowledge flags 0, reason 0x84 Unsupported
 * Protocol Version, property length 0. The 3.1.1 form has no property length, so an MQTT 5 parser reads it as malformed
 * or as reason 1, which MQTT 5 does not define as a refusal.
 */
const CONNACK_V5_UNSUPPORTED_PROTOCOL = Buffer.from([0x20, 0x03, 0x00, 0x84, 0x00]);

/** Why a CONNECT breaks MQTT 3.1.1 where the parser lets it pass (the server must close [MQTT-4.8.0-1]), or undefined. */
function connectViolation(p: IConnectPacket): string | undefined {
  if ((p.will?.qos ?? 0) > 2) return 'will QoS 3 [MQTT-3.1.2-14]';
  if (p.protocolVersion !== 5 && p.password !== undefined && p.username === undefined) return 'password without user name [MQTT-3.1.2-22]';
  return undefined;
}

/** What the link decides about device connections (links/mqtt.ts): the policy, the sessions, the counters. One for all. */
export interface MqttDeviceHooks<S> {
  /** Whether this CONNECT is a device's (its client id parses as one); anything else goes to the broker. */
  isDevice(packet: IConnectPacket): boolean;
  /** The device's CONNECT: who it is when admitted, else the CONNACK return code. */
  admit(conn: MqttDeviceConnection<S>, packet: IConnectPacket): DeviceAdmission | { refused: number };
  /** The CONNACK is written: the device is on. */
  ready(conn: MqttDeviceConnection<S>, admitted: DeviceAdmission): void;
  /** A publish to the device topic (the only one a device may publish to). */
  message(conn: MqttDeviceConnection<S>, text: string): void;
  /** A PINGREQ (traffic: last seen moves). */
  ping(conn: MqttDeviceConnection<S>): void;
  /** A PINGREQ, SUBSCRIBE or UNSUBSCRIBE past the free few of a keepalive period: it spends from the device's read budget. */
  control(conn: MqttDeviceConnection<S>): void;
  /** Something the device may not do; the connection is closed after this (counted and logged by the link). */
  refused(conn: MqttDeviceConnection<S>, reason: 'publish_denied' | 'qos2', detail: Record<string, unknown>): void;
  /** A CONNECT of a protocol level the link does not speak: a refusing CONNACK is written, then the connection is closed. */
  protocolRefused(conn: MqttDeviceConnection<S>, level: number, clientId: string | undefined): void;
  /** A packet the parser could not read, or the guard refused: the connection is closed after this. */
  malformed(conn: MqttDeviceConnection<S>, err: Error): void;
  /** A QoS 0 publish over the packet limit was skipped (the connection stays). */
  oversized(conn: MqttDeviceConnection<S>, info: OversizedPublish): void;
  /** Silent past 1.5 times its keepalive [MQTT-3.1.2-24]: the socket is closed after this. */
  keepaliveExpired(conn: MqttDeviceConnection<S>): void;
  /** No CONNECT came within the connect deadline: the socket is closed after this. */
  noConnect(conn: MqttDeviceConnection<S>): void;
  /** Something threw while a packet was handled: counted and logged; the connection is closed after this. */
  handlerFailed(conn: MqttDeviceConnection<S>, err: unknown): void;
  /** The socket closed (whoever closed it, device or not). */
  closed(conn: MqttDeviceConnection<S>): void;
  /** Not a device: the broker takes the socket, reading `replay` (every byte read so far) first, through `guard`. */
  handOff(conn: MqttDeviceConnection<S>, guard: MqttPacketGuard, replay: Buffer): void;
  /** A subscription other than its own inbox was asked for (SUBACK says failure for it). */
  subscribeDenied(conn: MqttDeviceConnection<S>, topic: string): void;
}

/** An admitted device's CONNECT, as the link read it. */
export interface DeviceAdmission {
  deviceId: string;
  /** The client id's uuid part (the whole client id when it has none). */
  clientUuid: string;
  credential: string;
  /** Its own inbox topic, the one subscription it may hold. */
  inbox: string;
  /** The keepalive it is held to, bounded by the link. */
  keepaliveSeconds: number;
}

/** Settings shared by every device connection of a link. */
export interface MqttDeviceOptions<S> {
  hooks: MqttDeviceHooks<S>;
  maxPacketBytes: number;
  connectTimeoutMs: number;
  unread: UnreadCheck;
}

/**
 * One device's MQTT connection, served by the link itself rather than by the general broker: a device uses a small
 * part of MQTT 3.1.1 (CONNECT, PUBLISH at QoS 0/1 to `device-server`, a SUBSCRIBE to its own inbox at most, PINGREQ,
 * DISCONNECT) and nothing it publishes goes to another client. The broker's per-client machinery (its Client, the
 * stream it reads, the end-of-stream listeners, the deliver closures, a timer rescheduled per packet) was ~5 KB of
 * heap per device and per-packet work on the call path (docs/performance.md, "leanmqtt"). Every byte passes the
 * packet guard first, packets are read by mqtt-packet's parser, and anything outside that subset (a second CONNECT,
 * a packet before CONNECT, a publish elsewhere, QoS 2, a reply-only packet type) closes the connection.
 * Sockets start here; a CONNECT that is not a device's is handed to the broker with the bytes read so far.
 */
export class MqttDeviceConnection<S = unknown> implements DeviceLink {
  readonly transport = 'mqtt' as const;
  private state: 'connect' | 'open' | 'closed' = 'connect';
  private readonly parser = mqttPacket.parser();
  /** Bytes read before CONNECT was decided: replayed to the broker for a non-device client. */
  private early: Buffer[] | undefined = [];
  private keepaliveMs = 0;
  /** PINGREQ, SUBSCRIBE and UNSUBSCRIBE packets since the last keepalive check (see `control`). */
  private controls = 0;
  /** performance.now() of the last packet: a wall-clock step (NTP) must not make every device look silent at once. */
  private lastPacketAt = 0;
  /** The CONNECT deadline until CONNECT, then the keepalive check. */
  private timer: NodeJS.Timeout | undefined;
  private readonly guard: MqttPacketGuard;
  clientId = '';
  inbox = '';
  /** What the link keeps for this device (its session), once it is ready. */
  owner: S | undefined;

  constructor(
    readonly socket: Socket,
    readonly remoteAddress: string,
    private readonly o: MqttDeviceOptions<S>,
  ) {
    // The CONNECT comes before any credentials: it is held to far less than the packets after it (MAX_CONNECT_BYTES).
    const connectLimit = Math.min(o.maxPacketBytes, MAX_CONNECT_BYTES);
    this.guard = new MqttPacketGuard(o.maxPacketBytes, (info) => this.o.hooks.oversized(this, info), connectLimit);
    // An idle socket holds a descriptor: one that never sends CONNECT is closed soon.
    this.timer = setTimeout(this.noConnect, o.connectTimeoutMs);
    leanParserList(this.parser);
    this.parser.on('packet', (p: Packet) => this.onPacket(p));
    this.parser.on('error', (err: Error) => this.fail(err));
    socket.on('data', this.onData);
    socket.on('close', () => this.onClose());
  }

  get localAddress(): string {
    return this.socket.localAddress ?? '';
  }

  private readonly noConnect = (): void => {
    if (this.state !== 'connect') return;
    this.o.hooks.noConnect(this);
    this.close();
  };

  get open(): boolean {
    return this.state === 'open' && !this.socket.destroyed;
  }

  private readonly onData = (chunk: Buffer): void => {
    if (this.state === 'closed') return;
    const passed = this.guard.pass(chunk);
    if (passed instanceof MqttFramingError) return this.fail(passed);
    if (passed === undefined) return;
    this.early?.push(passed);
    try {
      this.parser.parse(passed);
    } catch (err) {
      // A throw nobody foresaw (the policy, the registry, a session) ends this connection, not the process.
      this.o.hooks.handlerFailed(this, err);
      this.close();
    }
  };

  private onPacket(p: Packet): void {
    if (this.state === 'closed') return;
    this.lastPacketAt = performance.now();
    if (this.state === 'connect') return this.onConnect(p);
    // mqtt-packet reads a packet id of 0 (or -1, when the packet ends before it) without refusing it.
    if ((p.cmd === 'subscribe' || p.cmd === 'unsubscribe' || (p.cmd === 'publish' && p.qos > 0)) && !(p.messageId! > 0))
      return this.fail(new MqttFramingError(`${p.cmd} without a packet id [MQTT-2.3.1-1]`));
    switch (p.cmd) {
      case 'publish':
        if (p.qos === 2) return this.refuse('qos2', { clientId: this.clientId });
        if (p.topic !== DEVICE_PUBLISH_TOPIC) return this.refuse('publish_denied', { clientId: this.clientId, topic: p.topic });
        if (p.qos === 1) this.write(ack(PUBACK, p.messageId!));
        return this.o.hooks.message(this, typeof p.payload === 'string' ? p.payload : p.payload.toString('utf8'));
      case 'pingreq':
        this.control();
        return this.write(PINGRESP);
      case 'subscribe': {
        this.control();
        const granted = p.subscriptions.map((s) => {
          if (s.topic === this.inbox) return s.qos;
          this.o.hooks.subscribeDenied(this, s.topic);
          return SUBACK_FAILURE;
        });
        return this.write(mqttPacket.generate({ cmd: 'suback', messageId: p.messageId, granted }));
      }
      case 'unsubscribe':
        this.control();
        return this.write(ack(UNSUBACK, p.messageId!));
      case 'puback':
      case 'pubrec':
      case 'pubcomp':
      case 'pubrel':
        return; // answers to QoS packets the gateway never sends (it sends QoS 0), or to a QoS 2 it refuses
      case 'disconnect':
        return this.close();
      default:
        // A second CONNECT [MQTT-3.1.0-2], or a packet only a server sends: counted and logged, as a parse error is.
        return this.fail(new MqttFramingError(`unexpected ${p.cmd}`));
    }
  }

  private onConnect(p: Packet): void {
    if (p.cmd !== 'connect') return this.fail(new MqttFramingError(`${p.cmd} before CONNECT`)); // [MQTT-3.1.0-1]
    // MQTT 3.1 and 3.1.1 only, for every client (the broker speaks no more): MQTT 5 is read by the parser, the rest in fail().
    if (p.protocolVersion !== 3 && p.protocolVersion !== 4) return this.refuseProtocol(p.protocolVersion ?? 0, p.clientId);
    // Checked for every client, device or backend: mqtt-packet reads these flags without refusing them.
    const violation = connectViolation(p);
    if (violation) return this.fail(new MqttFramingError(violation));
    if (p.clientId === '' && !p.clean) {
      // [MQTT-3.1.3-8]: no id, so no session to keep; aedes would serve it as a clean session.
      this.o.hooks.malformed(this, new MqttFramingError('zero-length client id with clean session 0'));
      return this.refuseConnect(CONNACK_IDENTIFIER_REJECTED);
    }
    if (!this.o.hooks.isDevice(p)) {
      const replay = Buffer.concat(this.early ?? []);
      this.release();
      return this.o.hooks.handOff(this, this.guard, replay);
    }
    this.early = undefined;
    clearTimeout(this.timer);
    let refused: number | undefined;
    if (p.protocolVersion === 3 && p.clientId.length > MQTT31_MAX_CLIENT_ID) refused = CONNACK_IDENTIFIER_REJECTED;
    this.clientId = p.clientId;
    const verdict = refused === undefined ? this.o.hooks.admit(this, p) : { refused };
    if ('refused' in verdict) return this.refuseConnect(verdict.refused);
    this.inbox = verdict.inbox;
    this.state = 'open';
    this.write(connack(0));
    this.keepaliveMs = verdict.keepaliveSeconds * 1500 + 1; // [MQTT-3.1.2-24]: 1.5 times the keepalive
    this.timer = setTimeout(this.checkKeepalive, this.keepaliveMs);
    this.o.hooks.ready(this, verdict);
  }

  /**
   * A level this link does not speak, then close. MQTT 5 (with or without the bridge bit) gets the v5 CONNACK 0x84, the
   * only form its client can read (MQTT 5.0 4.13); any other level the 3.1.1 CONNACK 1 [MQTT-3.1.2-2], as no other
   * form is known to its client. Refused here for every client, device or backend, before the broker could read it:
   * aedes would answer MQTT 5 in the 3.1.1 form.
   */
  private refuseProtocol(level: number, clientId: string | undefined): void {
    this.o.hooks.protocolRefused(this, level, clientId);
    this.refuseWith((level & 0x7f) === 5 ? CONNACK_V5_UNSUPPORTED_PROTOCOL : connack(CONNACK_UNACCEPTABLE_PROTOCOL));
  }

  private refuseConnect(returnCode: number): void {
    this.refuseWith(connack(returnCode));
  }

  /** Closed once the CONNACK is written [MQTT-3.2.2-5], so the client reads why. */
  private refuseWith(refusal: Buffer): void {
    this.release();
    this.socket.end(refusal, () => this.socket.destroy());
  }

  /**
   * A packet answered at once that carries nothing to the session. A device's keepalives and its one subscription are a
   * few per keepalive period and only move last seen; past them each spends from its read budget as an unsolicited
   * frame does, so a flood of them (every one answered with a write) pauses reading like any other.
   */
  private control(): void {
    if (++this.controls > FREE_CONTROL_PACKETS) this.o.hooks.control(this);
    else this.o.hooks.ping(this);
  }

  /** Fires once per keepalive period, not per packet: the socket is closed when the last packet is older than it. */
  private readonly checkKeepalive = (): void => {
    if (this.state === 'closed') return;
    this.controls = 0;
    const idle = performance.now() - this.lastPacketAt;
    if (idle >= this.keepaliveMs) {
      this.o.hooks.keepaliveExpired(this);
      return this.close();
    }
    this.timer = setTimeout(this.checkKeepalive, this.keepaliveMs - idle);
  };

  /** A PUBLISH at QoS 0 to the device's inbox, built in one buffer and written in one call. False when not open. */
  send(text: string): boolean {
    if (!this.open) return false;
    const topicBytes = Buffer.byteLength(this.inbox);
    const payloadBytes = Buffer.byteLength(text);
    const remaining = 2 + topicBytes + payloadBytes;
    let lengthBytes = 1;
    for (let n = remaining; n >= 128; n = Math.floor(n / 128)) lengthBytes++;
    const buf = Buffer.allocUnsafe(1 + lengthBytes + remaining);
    buf[0] = 0x30;
    let i = 1;
    let n = remaining;
    do {
      let byte = n % 128;
      n = Math.floor(n / 128);
      if (n > 0) byte |= 0x80;
      buf[i++] = byte;
    } while (n > 0);
    buf.writeUInt16BE(topicBytes, i);
    i += 2;
    i += buf.write(this.inbox, i, 'utf8');
    buf.write(text, i, 'utf8');
    this.write(buf);
    return true;
  }

  // Packets of the read already under way still come (the session holds them); a paused device's PINGREQs wait too.
  pauseReading(): void {
    if (this.open) this.socket.pause();
  }

  resumeReading(): void {
    if (this.open) this.socket.resume();
  }

  /** What the device has not read yet: past the link's unread bound the connection is closed (counted and logged there). */
  bufferedBytes(): number {
    return this.socket.writableLength;
  }

  private write(buf: Buffer): void {
    if (this.socket.destroyed) return;
    this.socket.write(buf);
    const unread = this.socket.writableLength;
    if (unread > this.o.unread.maxBytes && this.o.unread.exceeded(unread, { clientId: this.clientId, remote: this.remoteAddress })) this.close();
  }

  private refuse(reason: 'publish_denied' | 'qos2', detail: Record<string, unknown>): void {
    this.o.hooks.refused(this, reason, detail);
    this.close();
  }

  private fail(err: Error): void {
    if (this.state === 'closed') return;
    if (this.state === 'connect' && this.early) {
      // The parser refuses a CONNECT whose level it does not read (0, 6 and up) before the level could be answered.
      const level = connectProtocolLevel(this.early.length === 1 ? this.early[0]! : Buffer.concat(this.early));
      if (level !== undefined && (level & 0x7f) !== 3 && (level & 0x7f) !== 4) return this.refuseProtocol(level, undefined);
    }
    this.o.hooks.malformed(this, err);
    this.close();
  }

  close(): void {
    this.release();
    this.socket.destroy();
  }

  /** Stops reading and timing this socket (it is closed, or the broker reads it now). */
  private release(): void {
    this.state = 'closed';
    this.early = undefined;
    clearTimeout(this.timer);
    this.socket.off('data', this.onData);
  }

  private onClose(): void {
    this.state = 'closed';
    clearTimeout(this.timer);
    this.o.hooks.closed(this);
  }
}
