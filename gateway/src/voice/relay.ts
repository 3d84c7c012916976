import {
  DeviceHelloSchema,
  isBinaryProtocolVersion,
  upstreamAuthorization,
  type BinaryProtocolVersion,
  type DeviceFrame,
  type UpstreamCredential,
  type UpstreamHello,
} from '@voxgate/protocol';
import type { Logger } from 'pino';
import type { RawData, WebSocket } from 'ws';
import { CLOSE_NORMAL, CLOSE_VOICE_UNAVAILABLE } from '../devices/link.js';
import { endUdpVoiceRequest } from '../devices/no-voice-hook.js';
import type { VoiceDevice, VoiceHook } from '../devices/voice-hook.js';
import type { VoiceMetrics } from './metrics.js';
import type { VoiceSlot, VoiceTenantShares } from './tenant-shares.js';
import { answerUpstreamMcp, type HubExposure, type HubPort } from './upstream-mcp.js';
import { openUpstream, parseUpstreamJson, UpstreamError } from './upstream.js';

import type { VoiceConfig } from './config.js';
export type { VoiceConfig };

/** The voice server's MCP requests in flight per session; more are answered "busy" at once. */
export const UPSTREAM_MCP_MAX_IN_FLIGHT = 16;

/** Where a voice session's downlink audio goes, and how uplink audio reaches the voice server. */
export interface DeviceAudioPath {
  readonly transport: 'websocket' | 'udp';
  /** The binary protocol spoken with the voice server. */
  readonly upstreamVersion: BinaryProtocolVersion;
  /** One binary message from the voice server, for the device. */
  toDevice(frame: Buffer): void;
  /** The device's answer to the voice server's hello. */
  deviceHello(up: UpstreamHello): object;
  /** Release what the path holds (a UDP binding). */
  close(): void;
}

/** The UDP side, when MQTT devices may open voice sessions (voice/udp-audio.ts). */
export interface UdpAudioFactory {
  /** `declared`: the device hello's audio (channels, frame duration), which its UDP payloads must fit. */
  open(session: VoiceSessionHandle, declared?: { channels?: number | undefined; frameDurationMs?: number | undefined }): DeviceAudioPath;
}

/** What a UDP binding sees of its voice session. */
export interface VoiceSessionHandle {
  readonly deviceId: string;
  readonly device: VoiceDevice;
  /** Uplink audio (already decrypted, framed for the voice server). */
  sendUpstream(frame: Buffer, payloadBytes: number): void;
  touch(): void;
}

type EndReason = 'device_closed' | 'upstream_closed' | 'device_goodbye' | 'upstream_goodbye' | 'idle' | 'replaced' | 'shutdown';

/** ws.send's options for every audio frame: one object, not one per frame. */
const BINARY = { binary: true } as const;

class VoiceSession implements VoiceSessionHandle {
  upstream?: WebSocket;
  path?: DeviceAudioPath;
  /** The session start, or the last idle sweep that found audio relayed since the sweep before (see `endIdle`). */
  lastAudioAt = Date.now();
  /** Audio frames relayed either way; the idle sweep compares it with `framesAtSweep`. */
  frames = 0;
  framesAtSweep = 0;
  ended = false;
  upstreamSessionId = '';
  mcpInFlight = 0;
  /** Its place in its tenant's share (voice.maxSessionsPerTenant), released when it is dropped. */
  slot?: VoiceSlot;

  constructor(
    readonly device: VoiceDevice,
    readonly transport: 'websocket' | 'udp',
    private readonly relay: VoiceRelay,
  ) {}

  get deviceId(): string {
    return this.device.deviceId;
  }

  sendUpstream(frame: Buffer, payloadBytes: number): void {
    this.relay.toUpstream(this, frame, payloadBytes);
  }

  /** Audio went through. A count, not a clock read per frame: the idle sweep turns it into a time. */
  touch(): void {
    this.frames++;
  }
}

export interface VoiceRelayDeps {
  config: VoiceConfig;
  log: Logger;
  metrics: VoiceMetrics;
  /** Present when MQTT devices may open voice sessions over UDP. */
  udp?: UdpAudioFactory;
  /** Sessions per device tenant, shared with the conversation (voice/tenant-shares.ts). */
  shares?: VoiceTenantShares | undefined;
}

/**
 * Relays each device's voice session to the configured voice server: one upstream WebSocket per session,
 * JSON both ways (MCP excepted: the device's MCP stays the gateway's), audio both ways, bounded buffers,
 * a session cap, an idle end. Never throws into a link handler.
 */
export class VoiceRelay implements VoiceHook {
  private readonly sessions = new Map<VoiceDevice, VoiceSession>();
  private readonly sweep: NodeJS.Timeout;
  private hub: HubPort | undefined;
  /** Each device's tenant (devices/tenants.ts): a voice server sees the hub as its device's tenant does. */
  private tenantOf: (deviceId: string) => string | undefined = () => undefined;
  private closed = false;

  constructor(private readonly d: VoiceRelayDeps) {
    // Half the period a sweep per quarter of the timeout would have: a session's last frame is stamped by the sweep
    // after it (see endIdle), so a silent session still ends at most a quarter of the timeout (10 s at most) late.
    const every = Math.max(25, Math.min(5_000, Math.floor(d.config.idleTimeoutMs / 8)));
    this.sweep = setInterval(() => this.endIdle(), every);
    this.sweep.unref();
  }

  /** The hub whose tools voice.exposeHubTools lists for voice servers. */
  useHub(hub: HubPort): void {
    this.hub = hub;
  }

  useTenancy(tenantOf: (deviceId: string) => string | undefined): void {
    this.tenantOf = tenantOf;
  }

  get activeCount(): number {
    return this.sessions.size;
  }

  // eslint-disable-next-line max-lines-per-function -- a voice session's admission, in the firmware's order: hello checks, upstream dial, server hello
  async onHello(device: VoiceDevice, frame: DeviceFrame): Promise<boolean> {
    const hello = DeviceHelloSchema.safeParse(frame);
    // The link decides, not the hello's claim: MQTT carries no audio, so its voice goes over UDP.
    const transport = device.transport === 'mqtt' ? 'udp' : 'websocket';
    if (this.closed) return false; // shutting down: the links are closing every device
    const previous = this.sessions.get(device);
    if (previous && !previous.upstream) {
      // One upstream connect at a time per device: a hello flood cannot fan out into connections.
      this.d.metrics.sessions.inc({ transport, outcome: 'duplicate_hello' });
      return false;
    }
    if (previous) this.end(previous, 'replaced');
    const log = this.d.log.child({ deviceId: device.deviceId, component: 'voice' });
    if (transport === 'udp' && !this.d.udp) {
      this.d.metrics.sessions.inc({ transport, outcome: 'udp_unavailable' });
      this.refuse(device, transport, 'Voice over MQTT is not enabled on this gateway');
      return false;
    }
    if (this.sessions.size >= this.d.config.maxSessions) {
      this.d.metrics.sessions.inc({ transport, outcome: 'busy' });
      log.warn({ maxSessions: this.d.config.maxSessions }, 'voice session refused: voice.maxSessions reached');
      this.refuse(device, transport, 'The voice service is busy; try again later');
      return false;
    }
    if (this.d.shares && !this.d.shares.admits(device.deviceId, transport)) {
      this.refuse(device, transport, 'The voice service is busy; try again later');
      return false;
    }
    const vs = new VoiceSession(device, transport, this);
    this.sessions.set(device, vs);
    vs.slot = this.d.shares?.take(device.deviceId);
    this.d.metrics.active.set(this.sessions.size);
    const deviceVersion = hello.success && isBinaryProtocolVersion(hello.data.version) ? hello.data.version : 1;
    try {
      vs.path =
        transport === 'udp'
          ? this.d.udp!.open(vs, { channels: hello.data?.audio_params?.channels, frameDurationMs: hello.data?.audio_params?.frame_duration })
          : this.webSocketPath(device, deviceVersion);
    } catch (e) {
      this.drop(vs);
      this.d.metrics.sessions.inc({ transport, outcome: 'udp_unavailable' });
      log.warn({ err: e instanceof Error ? e.message : String(e) }, 'voice session refused: no UDP binding');
      this.refuse(device, transport, 'The voice service is busy; try again later');
      return false;
    }
    const t0 = performance.now();
    const upHello: Record<string, unknown> = {
      ...(hello.success ? hello.data : {}),
      type: 'hello',
      version: vs.path.upstreamVersion,
      transport: 'websocket',
    };
    try {
      const {
        ws,
        hello: up,
        early,
      } = await openUpstream(
        this.upstreamUrl(transport),
        this.upstreamHeaders(device, vs.path.upstreamVersion),
        upHello,
        this.d.config.upstream.connectTimeoutMs,
      );
      if (vs.ended || this.sessions.get(device) !== vs) {
        ws.terminate();
        return false;
      }
      vs.upstream = ws;
      vs.upstreamSessionId = up.session_id;
      this.d.metrics.connectSeconds.observe((performance.now() - t0) / 1000);
      this.d.metrics.sessions.inc({ transport, outcome: 'opened' });
      ws.on('message', (data: RawData, isBinary: boolean) => this.fromUpstream(vs, data, isBinary));
      ws.on('close', () => this.end(vs, 'upstream_closed'));
      ws.on('error', (e: Error) => log.warn({ err: e.message }, 'voice server connection error'));
      device.send(JSON.stringify(vs.path.deviceHello(up)));
      for (const m of early) this.onUpstreamMcp(vs, m['payload']);
      log.info({ transport, upstreamSession: up.session_id }, 'voice session relayed');
      return true;
    } catch (e) {
      const reason = e instanceof UpstreamError ? e.reason : 'upstream_error';
      this.d.metrics.sessions.inc({ transport, outcome: reason });
      log.warn({ reason, err: e instanceof Error ? e.message : String(e) }, 'voice server unavailable');
      this.drop(vs);
      vs.ended = true;
      vs.path.close();
      if (device.state !== 'closed') this.refuse(device, transport, 'The voice server is unavailable; try again later');
      return false;
    }
  }

  onJson(device: VoiceDevice, frame: DeviceFrame, text: string): boolean {
    const vs = this.sessions.get(device);
    if (!vs?.upstream) return false;
    if (frame.type === 'goodbye') {
      this.end(vs, 'device_goodbye');
      return true;
    }
    if (vs.upstream.readyState !== vs.upstream.OPEN) return true;
    // JSON is bounded like audio: a device cannot queue without limit behind a stalled voice server.
    if (vs.upstream.bufferedAmount > this.d.config.maxBufferedBytes) this.d.metrics.dropped.inc({ direction: 'up', reason: 'backpressure_json' });
    else vs.upstream.send(text);
    return true;
  }

  onAudio(device: VoiceDevice, data: Buffer): boolean {
    const vs = this.sessions.get(device);
    if (!vs?.upstream || vs.transport !== 'websocket') return false;
    if (data.length > this.d.config.maxFrameBytes + 16) {
      this.d.metrics.dropped.inc({ direction: 'up', reason: 'too_large' });
      return true;
    }
    this.toUpstream(vs, data, data.length);
    return true;
  }

  onClosed(device: VoiceDevice): void {
    const vs = this.sessions.get(device);
    if (vs) this.end(vs, 'device_closed');
  }

  /** Audio for the voice server, dropped (and counted) while its socket is backed up. */
  toUpstream(vs: VoiceSession, frame: Buffer, payloadBytes: number): void {
    const ws = vs.upstream;
    if (!ws || ws.readyState !== ws.OPEN) {
      this.d.metrics.dropped.inc({ direction: 'up', reason: 'no_session' });
      return;
    }
    if (ws.bufferedAmount > this.d.config.maxBufferedBytes) {
      this.d.metrics.dropped.inc({ direction: 'up', reason: 'backpressure' });
      return;
    }
    vs.frames++;
    ws.send(frame, BINARY);
    const up = this.d.metrics.relayed.up;
    up.frames.inc();
    up.bytes.inc(payloadBytes);
  }

  close(): void {
    this.closed = true;
    clearInterval(this.sweep);
    for (const vs of [...this.sessions.values()]) this.end(vs, 'shutdown');
  }

  private fromUpstream(vs: VoiceSession, data: RawData, isBinary: boolean): void {
    if (vs.ended) return;
    // With its default binaryType ws hands over a Buffer (fragments already joined): the usual case first.
    const buf = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
    if (isBinary) {
      if (buf.length > this.d.config.maxFrameBytes + 16) {
        this.d.metrics.dropped.inc({ direction: 'down', reason: 'too_large' });
        return;
      }
      vs.frames++;
      vs.path!.toDevice(buf);
      return;
    }
    const text = buf.toString('utf8');
    const msg = parseUpstreamJson(text);
    if (!msg || typeof msg['type'] !== 'string') {
      this.d.metrics.dropped.inc({ direction: 'down', reason: 'bad_json' });
      return;
    }
    switch (msg['type']) {
      case 'hello':
        return; // one hello per session, already answered
      case 'mcp':
        // The device's MCP is the gateway's: the voice server's requests are answered through its session.
        this.onUpstreamMcp(vs, msg['payload']);
        return;
      case 'goodbye':
        this.end(vs, 'upstream_goodbye');
        return;
      default:
        if (vs.device.bufferedBytes() > this.d.config.maxBufferedBytes) this.d.metrics.dropped.inc({ direction: 'down', reason: 'backpressure_json' });
        else vs.device.send(text);
    }
  }

  private onUpstreamMcp(vs: VoiceSession, payload: unknown): void {
    const reply = (r: unknown) => {
      if (r && vs.upstream?.readyState === vs.upstream?.OPEN) vs.upstream?.send(JSON.stringify({ type: 'mcp', session_id: vs.upstreamSessionId, payload: r }));
    };
    if (vs.mcpInFlight >= UPSTREAM_MCP_MAX_IN_FLIGHT) {
      const id = (payload as { id?: unknown } | null)?.id;
      this.d.metrics.upstreamMcp.inc({ method: 'any', answer: 'busy' });
      if (typeof id === 'number' || typeof id === 'string')
        reply({ jsonrpc: '2.0', id, error: { code: -32000, message: `more than ${UPSTREAM_MCP_MAX_IN_FLIGHT} requests in flight` } });
      return;
    }
    vs.mcpInFlight++;
    void answerUpstreamMcp(vs.device, payload, this.d.metrics, this.hubExposure(vs.deviceId))
      .then(reply)
      .finally(() => vs.mcpInFlight--);
  }

  /** End a voice session once: close the voice server's socket; tell or close the device as its transport needs. */
  private end(vs: VoiceSession, reason: EndReason): void {
    if (vs.ended) return;
    vs.ended = true;
    this.drop(vs);
    this.d.metrics.ended.inc({ reason });
    vs.path?.close();
    const up = vs.upstream;
    if (up) {
      up.removeAllListeners('message');
      up.removeAllListeners('close');
      up.on('error', () => undefined);
      if (reason === 'upstream_closed') up.terminate();
      else {
        // The voice server learns of a device goodbye the way the MQTT gateway tells it: the socket closes.
        up.close(CLOSE_NORMAL, reason);
        setTimeout(() => up.terminate(), 1000).unref();
      }
    }
    // On shutdown the links close devices themselves (1001, going away).
    if (reason === 'device_closed' || reason === 'replaced' || reason === 'shutdown') return;
    if (vs.transport === 'udp') {
      // MQTT devices keep their link (and MCP): a goodbye with the voice session's id closes the UDP channel.
      if (reason !== 'device_goodbye') vs.device.send(JSON.stringify({ type: 'goodbye', session_id: vs.upstreamSessionId }));
    } else {
      // WebSocket devices connect for one voice session: it is over.
      vs.device.close(CLOSE_NORMAL, `voice session ended (${reason})`);
    }
    this.d.log.info({ deviceId: vs.deviceId, reason }, 'voice session ended');
  }

  /** The session leaves the table and frees its tenant's share (once: the slot ignores a second release). */
  private drop(vs: VoiceSession): void {
    if (this.sessions.get(vs.device) === vs) this.sessions.delete(vs.device);
    vs.slot?.release();
    this.d.metrics.active.set(this.sessions.size);
  }

  private hubExposure(deviceId: string): HubExposure | undefined {
    return this.d.config.exposeHubTools && this.hub ? { hub: this.hub, tenant: this.tenantOf(deviceId) ?? this.d.config.hubTenant } : undefined;
  }

  /**
   * Sessions whose audio stopped: a session that relayed a frame since the last sweep has audio as of now;
   * one that did not ends once the last such sweep is `idleTimeoutMs` old (at most two sweep periods after its
   * last frame: the frames are counted, not timed, so the relay reads no clock per frame).
   */
  private endIdle(): void {
    const now = Date.now();
    const cutoff = now - this.d.config.idleTimeoutMs;
    for (const vs of [...this.sessions.values()]) {
      if (vs.frames !== vs.framesAtSweep) {
        vs.framesAtSweep = vs.frames;
        vs.lastAudioAt = now;
      } else if (vs.upstream && vs.lastAudioAt < cutoff) this.end(vs, 'idle');
    }
  }

  /** Tell the device in a way it shows (the reference firmware ignores `type:"error"`), then end its attempt. */
  private refuse(device: VoiceDevice, transport: 'websocket' | 'udp', message: string): void {
    const alert = { type: 'alert', status: 'error', message, emotion: 'sad' };
    // Over MQTT a goodbye alone left the firmware waiting 10 s for a hello, its MCP replies with it.
    if (transport === 'udp') return endUdpVoiceRequest(device, alert);
    device.send(JSON.stringify(alert));
    device.close(CLOSE_VOICE_UNAVAILABLE, 'voice server unavailable');
  }

  private webSocketPath(device: VoiceDevice, version: BinaryProtocolVersion): DeviceAudioPath {
    const metrics = this.d.metrics;
    const down = metrics.relayed.down;
    const maxBuffered = this.d.config.maxBufferedBytes;
    return {
      transport: 'websocket',
      // The same protocol both ways: frames pass unchanged.
      upstreamVersion: version,
      toDevice(frame) {
        if (device.bufferedBytes() > maxBuffered) {
          metrics.dropped.inc({ direction: 'down', reason: 'backpressure' });
          return;
        }
        if (!device.sendBinary(frame)) return metrics.dropped.inc({ direction: 'down', reason: 'no_session' });
        down.frames.inc();
        down.bytes.inc(frame.length);
      },
      deviceHello: (up) => ({ ...up, type: 'hello', transport: 'websocket', session_id: up.session_id }),
      close() {},
    };
  }

  private upstreamUrl(transport: 'websocket' | 'udp'): string {
    const url = new URL(this.d.config.upstream.url!);
    // xiaozhi-esp32-server reads a 16-byte header on binary frames from connections marked this way.
    if (transport === 'udp') url.searchParams.set('from', 'mqtt_gateway');
    return url.toString();
  }

  private upstreamHeaders(device: VoiceDevice, version: BinaryProtocolVersion): Record<string, string> {
    const u = this.d.config.upstream;
    const cred: UpstreamCredential = u.token !== undefined ? { token: u.token } : u.hmacSecret !== undefined ? { hmacSecret: u.hmacSecret } : {};
    const headers: Record<string, string> = {
      ...u.headers,
      'Device-Id': device.deviceId,
      'Client-Id': device.clientId,
      'Protocol-Version': String(version),
    };
    const auth = upstreamAuthorization(cred, device.clientId, device.deviceId, Date.now() / 1000);
    if (auth) headers['Authorization'] = auth;
    const remote = device.remoteAddress;
    if (remote) headers['X-Forwarded-For'] = remote.replace(/^::ffff:/, '');
    return headers;
  }
}
