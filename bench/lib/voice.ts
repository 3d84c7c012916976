/**
 * Voice devices for the relayed-audio bench: each opens a voice session, sends Opus-sized frames and times
 * the echo of each one (the voice server double echoes binary frames unchanged).
 *
 * On the wire they behave like the reference firmware (shared/reference/xiaozhi-device-protocol.md §1.8–1.10):
 * - `ws`: `Device-Id`, `Client-Id`, `Protocol-Version` headers, a client hello; binary protocol 1 (a raw Opus
 *   frame per message) or 2 (the 16-byte header). The same device talks to the gateway or, for the floor,
 *   straight to the voice server.
 * - `udp`: MQTT (client id `GID_…`, publishes to `device-server`, subscribes to nothing) for the hello, then
 *   UDP packets `|1|flags|len|ssrc|timestamp|sequence|` + AES-128-CTR(Opus) with the header as the counter
 *   block, to the address and key of the server hello's `udp` block.
 * Both answer the gateway's initialize and a one-page tools/list before the measurement starts.
 *
 * A frame opens with an Opus TOC byte for one 60 ms mono frame (the gateway checks the shape of what it
 * relays), then 4 bytes carrying its number; the rest is a per-device pattern, so an echo is checked byte for
 * byte (`corrupt` counts echoes that differ, duplicates included) and its round trip timed.
 */
import { createCipheriv, randomUUID } from 'node:crypto';
import { createSocket, type Socket } from 'node:dgram';
import { connect as mqttConnect, type MqttClient } from 'mqtt';
import { WebSocket, type RawData } from 'ws';
import { pooled, quantile } from './samples.js';

/** The firmware's OPUS_FRAME_DURATION_MS. */
export const FRAME_MS = 60;
/** A 60 ms, 16 kHz mono Opus frame at ~21 kbit/s. */
export const OPUS_BYTES = 160;
/** TOC byte (RFC 6716 §3.1): config 11 (SILK wideband, 60 ms), mono, one frame. */
const OPUS_TOC_60MS_MONO = 0x58;
/** Frames in flight per device are tracked in a ring this large: an echo later than that counts as corrupt, its frame as lost. */
const RING = 1024;
const V2_HEADER = 16;
const AUDIO_PARAMS = { format: 'opus', sample_rate: 16000, channels: 1, frame_duration: FRAME_MS };
const INIT_RESULT = '{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"bench-voice","version":"1.7.6"}}';
const TOOLS_RESULT = '{"tools":[{"name":"self.get_device_status","description":"Device status","inputSchema":{"type":"object","properties":{}}}]}';

export interface VoiceLoadOptions {
  transport: 'ws' | 'udp';
  /** ws://…/xiaozhi/v1/ (the gateway, the bare relay or the voice server) for `ws`; mqtt://… (the gateway or the bare relay) for `udp`. */
  url: string;
  /** Binary protocol on a `ws` device's WebSocket. */
  version: 1 | 2;
  devices: number;
  /** Second byte of every MAC, so runs never share a device id. */
  macGroup: number;
  /** `paced`: one frame per device every 60 ms; `saturate`: `window` frames in flight per device, a new one per echo. */
  pace: 'paced' | 'saturate';
  window: number;
  /** How long frames are sent; then the echoes still in flight are awaited (up to `drainMs`). */
  seconds: number;
  /** A gateway initializes and lists each device: wait for that before measuring (the floor sends no MCP). */
  expectMcp: boolean;
  connectTimeoutMs: number;
  drainMs: number;
  /** The MQTT username a `udp` device presents (78/xiaozhi-mqtt-gateway reads one; the others need none). */
  mqttUsername?: string;
  /** Called once every session is open, before the first frame (e.g. to read the relay's memory). */
  whenOpen?: () => Promise<void>;
}

export interface VoiceLoadResult {
  devices: number;
  connectFailures: number;
  sent: number;
  received: number;
  lost: number;
  corrupt: number;
  /** First frame sent → last echo received. */
  seconds: number;
  perSecond: number;
  p50: number;
  p99: number;
  /** Every echo's round trip, ms, sorted (for percentiles over several runs: `mergeVoiceLoads`). */
  rtts: Float64Array;
}

/** Several runs of one voice load as one: counts and seconds summed, the rate over the summed time, percentiles over every echo. */
export function mergeVoiceLoads(runs: readonly VoiceLoadResult[]): VoiceLoadResult {
  const sum = (f: (r: VoiceLoadResult) => number) => runs.reduce((s, r) => s + f(r), 0);
  const rtts = pooled(runs.map((r) => r.rtts));
  const [received, seconds] = [sum((r) => r.received), sum((r) => r.seconds)];
  return {
    devices: runs[0]?.devices ?? 0,
    connectFailures: sum((r) => r.connectFailures),
    sent: sum((r) => r.sent),
    received,
    lost: sum((r) => r.lost),
    corrupt: sum((r) => r.corrupt),
    seconds,
    perSecond: received / seconds,
    p50: quantile(rtts, 0.5),
    p99: quantile(rtts, 0.99),
    rtts,
  };
}

interface Run {
  o: VoiceLoadOptions;
  rtts: number[];
  sending: boolean;
  /** Called on every echo while draining. */
  onEcho?: () => void;
  lastEchoAt: number;
}

interface UdpBlock {
  server: string;
  port: number;
  key: string;
  nonce: string;
}

class VoiceDevice {
  sent = 0;
  received = 0;
  corrupt = 0;
  private readonly sentAt = new Float64Array(RING);
  private readonly ringSeq = new Int32Array(RING).fill(-1);
  private readonly pattern: Buffer;
  private sid = '';
  private ws?: WebSocket;
  private mqtt?: MqttClient;
  private udp?: { socket: Socket; key: Buffer; nonce: Buffer; server: string; port: number; sequence: number };
  private timer?: NodeJS.Timeout;
  private ready?: () => void;
  private helloSeen = false;
  private listed = false;

  constructor(
    private readonly run: Run,
    readonly index: number,
    readonly mac: string,
  ) {
    this.pattern = Buffer.alloc(OPUS_BYTES);
    for (let k = 0; k < OPUS_BYTES; k++) this.pattern[k] = (index * 7 + k * 13) & 0xff;
    this.pattern[0] = OPUS_TOC_60MS_MONO;
  }

  /** Open the link and the voice session; resolves false when it could not within the timeout. */
  open(): Promise<boolean> {
    const o = this.run.o;
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), o.connectTimeoutMs);
      this.ready = () => {
        clearTimeout(timer);
        resolve(true);
      };
      if (o.transport === 'ws') this.openWs();
      else this.openMqtt();
    });
  }

  start(): void {
    const o = this.run.o;
    if (o.pace === 'saturate') {
      for (let i = 0; i < o.window; i++) this.sendFrame();
      return;
    }
    // Spread the devices over the 60 ms period, as real devices' clocks are.
    const offset = Math.floor((this.index * FRAME_MS) / o.devices);
    this.timer = setTimeout(() => {
      if (!this.run.sending) return;
      this.sendFrame();
      this.timer = setInterval(() => (this.run.sending ? this.sendFrame() : clearInterval(this.timer)), FRAME_MS);
    }, offset);
  }

  get outstanding(): number {
    return this.sent - this.received;
  }

  close(): void {
    clearTimeout(this.timer);
    clearInterval(this.timer);
    if (this.ws) this.ws.terminate();
    if (this.mqtt) {
      this.mqtt.publish('device-server', JSON.stringify({ session_id: this.sid, type: 'goodbye' }), { qos: 0 });
      this.mqtt.end();
    }
    this.udp?.socket.close();
  }

  private openWs(): void {
    const o = this.run.o;
    const ws = new WebSocket(o.url, {
      headers: { 'Device-Id': this.mac, 'Client-Id': randomUUID(), 'Protocol-Version': String(o.version) },
      perMessageDeflate: false,
    });
    this.ws = ws;
    ws.on('open', () =>
      ws.send(JSON.stringify({ type: 'hello', version: o.version, features: { mcp: true }, transport: 'websocket', audio_params: AUDIO_PARAMS })),
    );
    ws.on('message', (data: RawData, isBinary: boolean) => {
      const buf = data as Buffer;
      if (!isBinary) return this.onText(buf.toString('utf8'));
      if (o.version === 1) return this.onEcho(buf);
      if (buf.length < V2_HEADER || buf.readUInt32BE(12) !== buf.length - V2_HEADER) return void this.corrupt++;
      this.onEcho(buf.subarray(V2_HEADER));
    });
    ws.on('error', () => undefined);
  }

  private openMqtt(): void {
    const clientId = `GID_voxgate@@@${this.mac.replace(/:/g, '_')}@@@${randomUUID()}`;
    const client = mqttConnect(this.run.o.url, {
      clientId,
      ...(this.run.o.mqttUsername === undefined ? {} : { username: this.run.o.mqttUsername }),
      protocolVersion: 4,
      clean: true,
      keepalive: 240,
      reconnectPeriod: 0,
      connectTimeout: this.run.o.connectTimeoutMs,
    });
    this.mqtt = client;
    // The reference device subscribes to nothing: the gateway pushes to it.
    client.on('message', (_topic: string, payload: Buffer) => this.onText(payload.toString('utf8')));
    client.on('error', () => undefined);
    // Without MCP (the bare relay floor) the device opens its audio channel at once.
    if (!this.run.o.expectMcp) client.on('connect', () => this.publishUdpHello());
  }

  private publishUdpHello(): void {
    this.publish(JSON.stringify({ type: 'hello', version: 3, transport: 'udp', features: { mcp: true }, audio_params: AUDIO_PARAMS }));
  }

  private publish(text: string): void {
    if (this.ws) this.ws.send(text);
    else this.mqtt?.publish('device-server', text, { qos: 0 });
  }

  private onText(text: string): void {
    let m: { type?: unknown; session_id?: unknown; udp?: UdpBlock; payload?: { id?: unknown; method?: unknown } };
    try {
      m = JSON.parse(text) as typeof m;
    } catch {
      return;
    }
    if (m.type === 'hello') {
      if (typeof m.session_id === 'string') this.sid = m.session_id;
      if (this.run.o.transport === 'udp') {
        if (m.udp) this.openUdp(m.udp);
        return;
      }
      this.helloSeen = true;
      return this.checkReady();
    }
    if (m.type !== 'mcp' || typeof m.payload?.id !== 'number') return;
    const id = m.payload.id;
    const result = m.payload.method === 'initialize' ? INIT_RESULT : m.payload.method === 'tools/list' ? TOOLS_RESULT : undefined;
    if (result === undefined)
      return this.publish(`{"session_id":"${this.sid}","type":"mcp","payload":{"jsonrpc":"2.0","id":${id},"error":{"message":"Method not implemented"}}}`);
    this.publish(`{"session_id":"${this.sid}","type":"mcp","payload":{"jsonrpc":"2.0","id":${id},"result":${result}}}`);
    if (m.payload.method !== 'tools/list') return;
    this.listed = true;
    // An MQTT device's MCP session is up: now it opens its audio channel.
    if (this.run.o.transport === 'udp') this.publishUdpHello();
    else this.checkReady();
  }

  private checkReady(): void {
    if (this.helloSeen && (this.listed || !this.run.o.expectMcp)) this.ready?.();
  }

  private openUdp(b: UdpBlock): void {
    const socket = createSocket('udp4');
    this.udp = { socket, key: Buffer.from(b.key, 'hex'), nonce: Buffer.from(b.nonce, 'hex'), server: b.server, port: b.port, sequence: 0 };
    socket.on('message', (packet: Buffer) => {
      if (packet.length < 16 || packet[0] !== 0x01) return void this.corrupt++;
      const d = createCipheriv('aes-128-ctr', this.udp!.key, packet.subarray(0, 16));
      this.onEcho(Buffer.concat([d.update(packet.subarray(16)), d.final()]));
    });
    socket.on('error', () => undefined);
    socket.bind(0, '127.0.0.1', () => this.ready?.());
  }

  private sendFrame(): void {
    const seq = this.sent++;
    const frame = Buffer.from(this.pattern);
    frame.writeUInt32BE(seq, 1);
    const slot = seq % RING;
    this.ringSeq[slot] = seq;
    this.sentAt[slot] = performance.now();
    const timestamp = (seq * FRAME_MS) >>> 0;
    if (this.udp) {
      const u = this.udp;
      const header = Buffer.from(u.nonce);
      header.writeUInt16BE(frame.length, 2);
      header.writeUInt32BE(timestamp, 8);
      header.writeUInt32BE(++u.sequence, 12);
      const c = createCipheriv('aes-128-ctr', u.key, header);
      u.socket.send(Buffer.concat([header, c.update(frame), c.final()]), u.port, u.server);
    } else if (this.run.o.version === 1) {
      this.ws!.send(frame, { binary: true });
    } else {
      const header = Buffer.alloc(V2_HEADER);
      header.writeUInt16BE(2, 0);
      header.writeUInt32BE(timestamp, 8);
      header.writeUInt32BE(frame.length, 12);
      this.ws!.send(Buffer.concat([header, frame]), { binary: true });
    }
  }

  private onEcho(payload: Buffer): void {
    const now = performance.now();
    if (payload.length !== OPUS_BYTES) return void this.corrupt++;
    const seq = payload.readUInt32BE(1);
    const slot = seq % RING;
    if (this.ringSeq[slot] !== seq || payload[0] !== OPUS_TOC_60MS_MONO || !payload.subarray(5).equals(this.pattern.subarray(5))) return void this.corrupt++;
    this.ringSeq[slot] = -1;
    this.received++;
    this.run.rtts.push(now - this.sentAt[slot]!);
    this.run.lastEchoAt = now;
    if (this.run.o.pace === 'saturate' && this.run.sending) this.sendFrame();
    this.run.onEcho?.();
  }
}

function macOf(group: number, index: number): string {
  const b = [0x02, 0x76, group & 0xff, (index >>> 16) & 0xff, (index >>> 8) & 0xff, index & 0xff];
  return b.map((x) => x.toString(16).padStart(2, '0')).join(':');
}

/** Open `devices` voice sessions, send frames for `seconds`, wait for the echoes, close everything. */
export async function runVoiceLoad(o: VoiceLoadOptions): Promise<VoiceLoadResult> {
  const run: Run = { o, rtts: [], sending: false, lastEchoAt: 0 };
  const devices = Array.from({ length: o.devices }, (_, i) => new VoiceDevice(run, i, macOf(o.macGroup, i)));
  try {
    const opened = await Promise.all(devices.map((d) => d.open()));
    const connectFailures = opened.filter((ok) => !ok).length;
    const live = devices.filter((_, i) => opened[i]);
    await o.whenOpen?.();
    run.sending = true;
    const t0 = performance.now();
    for (const d of live) d.start();
    await new Promise((r) => setTimeout(r, o.seconds * 1000));
    run.sending = false;
    // Drain: every echo back, or the deadline.
    await new Promise<void>((resolve) => {
      const done = () => {
        if (live.every((d) => d.outstanding === 0)) finish();
      };
      const timer = setTimeout(() => finish(), o.drainMs);
      const finish = () => {
        clearTimeout(timer);
        run.onEcho = undefined;
        resolve();
      };
      run.onEcho = done;
      done();
    });
    const sent = live.reduce((n, d) => n + d.sent, 0);
    const received = live.reduce((n, d) => n + d.received, 0);
    const corrupt = live.reduce((n, d) => n + d.corrupt, 0);
    const seconds = ((run.lastEchoAt || performance.now()) - t0) / 1000;
    const sorted = Float64Array.from(run.rtts).sort();
    return {
      devices: o.devices,
      connectFailures,
      sent,
      received,
      lost: sent - received,
      corrupt,
      seconds,
      perSecond: received / seconds,
      p50: quantile(sorted, 0.5),
      p99: quantile(sorted, 0.99),
      rtts: sorted,
    };
  } finally {
    for (const d of devices) d.close();
  }
}
