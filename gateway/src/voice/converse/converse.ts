import { randomUUID } from 'node:crypto';
import { DeviceHelloSchema, isBinaryProtocolVersion, type AudioParams, type DeviceFrame } from '@voxgate/protocol';
import type { Logger } from 'pino';
import { CLOSE_NORMAL, CLOSE_VOICE_UNAVAILABLE } from '../../devices/link.js';
import type { VoiceDevice, VoiceHook } from '../../devices/voice-hook.js';
import { shareOf } from '../../principal.js';
import { BoundedLru } from '../../throttle/bounded-lru.js';
import type { ModelGates } from '../../throttle/model-gates.js';
import { ThrottledLog } from '../../throttle/throttled-log.js';
import { KeyedTokenBucket } from '../../throttle/token-bucket.js';
import type { VoiceMetrics } from '../metrics.js';
import { opusShape } from '../opus-packet.js';
import type { UdpAudioFactory, VoiceSessionHandle } from '../relay.js';
import type { ConverseConfig } from './config.js';
import type { OpusDecoder, OpusEncoder, ScheduledEncoder, SpeechDetector, SpeechRecognizer, SpeechSynthesizer } from './contracts.js';
import type { ConverseMetrics } from './metrics.js';
import { gatedRecognizer, gatedSynthesizer } from './providers/gated.js';
import { ConverseSession } from './session/conversation.js';
import { UPLINK_RATE, type SessionEvents, type TurnPort } from './session/ports.js';
import { udpTransport, webSocketTransport, type ConverseTransport } from './session/transport.js';
import { readVoiceInput, toDevice } from './session/wire.js';
import type { VoiceSlot, VoiceTenantShares } from '../tenant-shares.js';

/** The audio side (codecs, detector, WAV, resampler) and the speech providers a conversation uses. */
export interface ConverseKit {
  asr: SpeechRecognizer;
  tts: SpeechSynthesizer;
  decoder(sampleRate: number): OpusDecoder;
  encoder(sampleRate: number, frameMs: number): OpusEncoder | ScheduledEncoder;
  detector(): SpeechDetector;
  wav(pcm: Int16Array, sampleRate: number): Buffer;
  resample(pcm: Int16Array, from: number, to: number): Int16Array;
  /** Stops what the kit runs (encoder processes). */
  close?(): void;
}

/** The person-facing settings of one device's conversation. */
export interface DeviceProfile {
  tenant?: string | undefined;
  language?: string | undefined;
  voice?: string | undefined;
}

/** A turn source bound to a device's tenant and profile (converse/assistant-port.ts). */
export type TurnsFor = (deviceId: string) => TurnPort;

export type ConverseEvent = 'voice.transcript' | 'voice.reply' | 'voice.tool';

export interface ConverseDeps {
  config: ConverseConfig & { maxSessions: number; maxFrameBytes: number; maxBufferedBytes: number; idleTimeoutMs: number };
  log: Logger;
  metrics: ConverseMetrics;
  voiceMetrics: VoiceMetrics;
  /**
   * Built on first use (codecs and providers load only when a device converses); a promise while its code loads,
   * then the kit itself.
   */
  kit: () => ConverseKit | Promise<ConverseKit>;
  udp?: UdpAudioFactory | undefined;
  profile(deviceId: string): DeviceProfile;
  /** The gateway-wide bounds on speech requests (modelRequests.asr / .tts); absent: none. */
  gates?: Pick<ModelGates, 'asr' | 'tts'> | undefined;
  /** Sessions per device tenant, shared with the relay (voice/tenant-shares.ts). */
  shares?: VoiceTenantShares | undefined;
}

const FRAME_MS = 60;

/** A device's uplink audio budget, in milliseconds of audio (refilled at `maxUplinkRate` × real time). */
interface AudioBudget {
  ms: number;
  at: number;
}

interface Entry {
  device: VoiceDevice;
  id: string;
  transport: ConverseTransport;
  session: ConverseSession;
  lastAudioAt: number;
  /** The device's uplink budget (the same object the per-device map keeps across its sessions). */
  budget: AudioBudget;
  /** Its place in its tenant's share (voice.maxSessionsPerTenant), released when it ends. */
  slot: VoiceSlot | undefined;
}

/**
 * voice.mode "converse": Voxgate answers a device's voice session itself. One ConverseSession per device
 * voice session, over WebSocket (binary protocol 1-3) or MQTT + UDP (the relay's UDP socket); a session cap,
 * an idle end. Never throws into a link handler.
 */
export class Converse implements VoiceHook {
  private readonly entries = new Map<VoiceDevice, Entry>();
  private readonly sweep: NodeJS.Timeout;
  private turns: TurnsFor | undefined;
  private publish: ((type: ConverseEvent, deviceId: string, data: Record<string, unknown>) => void) | undefined;
  private closed = false;
  /** Per device id (a reconnect does not refill them): uplink audio, and utterances or wake words that reach the providers. */
  private readonly audioBudgets: BoundedLru<string, AudioBudget>;
  private readonly turnBudget: KeyedTokenBucket;
  private readonly floods: ThrottledLog;

  constructor(private readonly d: ConverseDeps) {
    const keys = Math.max(1000, d.config.maxSessions * 2);
    this.audioBudgets = new BoundedLru(keys);
    const c = d.config.converse;
    this.turnBudget = new KeyedTokenBucket({ ratePerSecond: c.turnsPerMinute / 60, burst: c.turnBurst }, { maxKeys: keys });
    this.floods = new ThrottledLog(d.log, 'warn', { linesPerWindow: 1, windowMs: 60_000, maxKeys: 1000 });
    const every = Math.max(50, Math.min(10_000, Math.floor(d.config.idleTimeoutMs / 4)));
    this.sweep = setInterval(() => this.endIdle(), every);
    this.sweep.unref();
  }

  /** The assistant is built after the device registry: it arrives here last. */
  useTurns(turns: TurnsFor, publish?: (type: ConverseEvent, deviceId: string, data: Record<string, unknown>) => void): void {
    this.turns = turns;
    this.publish = publish;
  }

  get activeCount(): number {
    return this.entries.size;
  }

  onHello(device: VoiceDevice, frame: DeviceFrame): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    try {
      const kit = this.d.kit();
      if (!(kit instanceof Promise)) return Promise.resolve(this.open(device, frame, kit));
      // The kit's code is loading (the first conversation): the device waits for the server hello meanwhile.
      return kit.then(
        (k) => device.state !== 'closed' && this.open(device, frame, k),
        (e: unknown) => this.failed(device, e),
      );
    } catch (e) {
      return Promise.resolve(this.failed(device, e));
    }
  }

  private failed(device: VoiceDevice, e: unknown): false {
    this.d.log.error({ deviceId: device.deviceId, err: e instanceof Error ? e.message : String(e) }, 'conversation could not start');
    this.refuse(device, 'The voice service failed to start');
    return false;
  }

  onJson(device: VoiceDevice, frame: DeviceFrame): boolean {
    const e = this.entries.get(device);
    if (!e) return false;
    const input = readVoiceInput(frame);
    if (input.kind === 'goodbye') this.end(e, 'device_goodbye');
    else e.session.input(input);
    return true;
  }

  onAudio(device: VoiceDevice, data: Buffer): boolean {
    const e = this.entries.get(device);
    if (!e || e.transport.kind !== 'websocket') return false;
    this.uplink(e, data);
    return true;
  }

  onClosed(device: VoiceDevice): void {
    const e = this.entries.get(device);
    if (e) this.end(e, 'device_closed');
  }

  close(): void {
    this.closed = true;
    clearInterval(this.sweep);
    for (const e of [...this.entries.values()]) this.end(e, 'shutdown');
  }

  private open(device: VoiceDevice, frame: DeviceFrame, kit: ConverseKit): boolean {
    const transportKind = device.transport === 'mqtt' ? 'udp' : 'websocket';
    if (this.closed) return false;
    const previous = this.entries.get(device);
    if (previous) this.end(previous, 'replaced');
    const log = this.d.log.child({ deviceId: device.deviceId, component: 'converse' });
    const turns = this.turns;
    if (!turns) {
      this.refuse(device, 'The assistant is not ready yet; try again shortly');
      return false;
    }
    if (!this.admit(device, transportKind, log)) return false;
    const hello = DeviceHelloSchema.safeParse(frame);
    const version = hello.success && isBinaryProtocolVersion(hello.data.version) ? hello.data.version : 1;
    const id = randomUUID();
    const drops = { drop: (direction: 'up' | 'down', reason: string) => this.d.voiceMetrics.dropped.inc({ direction, reason }) };
    // The UDP binding calls back into the entry, which is complete only once the session exists.
    const ref: { entry?: Entry } = {};
    const handle: VoiceSessionHandle = {
      deviceId: device.deviceId,
      device,
      sendUpstream: (f) => {
        if (ref.entry) this.uplink(ref.entry, f);
      },
      touch: () => {
        if (ref.entry) ref.entry.lastAudioAt = Date.now();
      },
    };
    const transport =
      transportKind === 'udp'
        ? // The audio the hello declared bounds what a packet may decrypt to (as in the relay): without it, random
          // bytes under a wrong key passed as Opus often enough to move the session's address pin.
          udpTransport(
            device,
            this.d.udp!.open(handle, { channels: hello.data?.audio_params?.channels, frameDurationMs: hello.data?.audio_params?.frame_duration }),
            this.d.config.maxFrameBytes,
            drops,
          )
        : webSocketTransport(device, version, this.d.config.maxFrameBytes, this.d.config.maxBufferedBytes, drops);
    const session = this.newSession(kit, device, id, transport, turns(device.deviceId), log);
    const entry: Entry = { device, id, transport, session, lastAudioAt: Date.now(), budget: this.audioBudget(device.deviceId), slot: undefined };
    ref.entry = entry;
    entry.slot = this.d.shares?.take(device.deviceId);
    this.entries.set(device, entry);
    this.d.metrics.active.set(this.entries.size);
    this.d.voiceMetrics.sessions.inc({ transport: transportKind, outcome: 'opened' });
    const audio: AudioParams = { format: 'opus', sample_rate: this.d.config.sampleRate, channels: 1, frame_duration: FRAME_MS };
    device.send(JSON.stringify(transport.hello(id, audio)));
    log.info({ transport: transportKind, session: id }, 'conversation started');
    return true;
  }

  /** Refuses the session (and says why) when UDP is off, or voice.maxSessions or the tenant's share is reached. */
  private admit(device: VoiceDevice, transportKind: 'udp' | 'websocket', log: Logger): boolean {
    if (transportKind === 'udp' && !this.d.udp) {
      this.d.voiceMetrics.sessions.inc({ transport: transportKind, outcome: 'udp_unavailable' });
      this.refuse(device, 'Voice over MQTT is not enabled on this gateway');
      return false;
    }
    if (this.entries.size >= this.d.config.maxSessions) {
      this.d.voiceMetrics.sessions.inc({ transport: transportKind, outcome: 'busy' });
      log.warn({ maxSessions: this.d.config.maxSessions }, 'conversation refused: voice.maxSessions reached');
      this.refuse(device, 'The voice service is busy; try again later');
      return false;
    }
    if (this.d.shares && !this.d.shares.admits(device.deviceId, transportKind)) {
      this.refuse(device, 'The voice service is busy; try again later');
      return false;
    }
    return true;
  }

  private newSession(kit: ConverseKit, device: VoiceDevice, id: string, transport: Entry['transport'], turns: TurnPort, log: Logger): ConverseSession {
    const profile = this.d.profile(device.deviceId);
    const events = this.sessionEvents(device.deviceId, id);
    // The device's tenant's share of the speech queues (principal.ts: devices without a tenant share one).
    const share = shareOf({ tenant: profile.tenant, untenantedOnly: profile.tenant === undefined });
    const gates = this.d.gates;
    return new ConverseSession({
      sessionId: id,
      deviceId: device.deviceId,
      out: { json: (m) => transport.json(m), frame: (o, ts) => transport.frame(o, ts) },
      audio: {
        decoder: kit.decoder(UPLINK_RATE),
        encoder: kit.encoder(this.d.config.sampleRate, FRAME_MS),
        detector: kit.detector(),
        wav: (p, r) => kit.wav(p, r),
        resample: (p, f, t) => kit.resample(p, f, t),
      },
      asr: gates ? gatedRecognizer(kit.asr, gates.asr, share) : kit.asr,
      tts: gates ? gatedSynthesizer(kit.tts, gates.tts, share) : kit.tts,
      turns,
      language: profile.language,
      voice: profile.voice,
      limits: {
        frameMs: FRAME_MS,
        leadFrames: this.d.config.converse.leadFrames,
        maxLeadFrames: this.d.config.converse.maxLeadFrames,
        maxQueuedFrames: this.d.config.converse.maxQueuedFrames,
        maxUtteranceMs: this.d.config.converse.maxUtteranceMs,
        asrTimeoutMs: this.d.config.asr.timeoutMs,
        preRollMs: this.d.config.converse.preRollMs,
        speculateAfterMs: this.d.config.converse.speculateAfterMs,
        maxAnswerChars: this.d.config.converse.maxAnswerChars,
      },
      log,
      metrics: this.d.metrics,
      events,
      conversation: this.memory(device.deviceId),
      admit: () => this.admitTurn(device.deviceId),
    });
  }

  /** An utterance or wake word may reach the recogniser or the model: voice.converse.turnsPerMinute per device. */
  private admitTurn(deviceId: string): boolean {
    if (this.turnBudget.take(deviceId).ok) return true;
    this.floods.write(
      { deviceId, turnsPerMinute: this.d.config.converse.turnsPerMinute },
      'utterances over voice.converse.turnsPerMinute; not answered',
      `turns:${deviceId}`,
    );
    return false;
  }

  /** The device's uplink budget: kept per device id, so a new session (a reconnect) does not refill it. */
  private audioBudget(deviceId: string): AudioBudget {
    const known = this.audioBudgets.get(deviceId);
    if (known) return known;
    const fresh = { ms: this.d.config.converse.uplinkBurstMs, at: Date.now() };
    this.audioBudgets.set(deviceId, fresh);
    return fresh;
  }

  /**
   * Uplink audio within voice.converse.maxUplinkRate × real time (a burst of uplinkBurstMs), charged by the
   * packet's own duration (its TOC) before it is decoded: a device streaming faster than it can speak costs the
   * codec and the detector nothing past its budget.
   */
  private withinAudioBudget(e: Entry, opus: Uint8Array): boolean {
    const c = this.d.config.converse;
    const now = Date.now();
    const b = e.budget;
    b.ms = Math.min(c.uplinkBurstMs, b.ms + (now - b.at) * c.maxUplinkRate);
    b.at = now;
    const ms = (opusShape(opus)?.durationMicros ?? FRAME_MS * 1000) / 1000;
    if (b.ms >= ms) {
      b.ms -= ms;
      return true;
    }
    this.d.voiceMetrics.dropped.inc({ direction: 'up', reason: 'rate' });
    this.floods.write(
      { deviceId: e.device.deviceId, maxUplinkRate: c.maxUplinkRate },
      'uplink audio faster than voice.converse.maxUplinkRate × real time; dropped',
      `audio:${e.device.deviceId}`,
    );
    return false;
  }

  private uplink(e: Entry, data: Buffer): void {
    if (data.length > this.d.config.maxFrameBytes + 16) return void this.d.voiceMetrics.dropped.inc({ direction: 'up', reason: 'too_large' });
    const opus = e.transport.uplink(data);
    if (!opus) return;
    e.lastAudioAt = Date.now();
    if (!this.withinAudioBudget(e, opus)) return;
    try {
      e.session.audio(opus);
    } catch (err) {
      // A codec or detector fault is this session's, never the link's.
      this.d.voiceMetrics.dropped.inc({ direction: 'up', reason: 'internal' });
      this.d.log.error({ deviceId: e.device.deviceId, err: err instanceof Error ? err.message : String(err) }, 'uplink audio handler failed');
    }
  }

  private readonly remembered = new Map<string, string>();

  /** The device's conversation id (the assistant's store bounds its length and age); least recent forgotten first. */
  private memory(deviceId: string): { get(): string | undefined; set(id: string): void } {
    return {
      get: () => this.remembered.get(deviceId),
      set: (id) => {
        this.remembered.delete(deviceId);
        this.remembered.set(deviceId, id);
        while (this.remembered.size > this.d.config.converse.maxRememberedDevices) this.remembered.delete(this.remembered.keys().next().value!);
      },
    };
  }

  private sessionEvents(deviceId: string, sessionId: string): SessionEvents {
    const pub = (type: ConverseEvent, data: Record<string, unknown>) => this.publish?.(type, deviceId, { session: sessionId, ...data });
    return {
      transcript: (text) => pub('voice.transcript', { text }),
      tool: (e) => pub('voice.tool', { ...e }),
      reply: (e) => pub('voice.reply', { text: e.text, outcome: e.outcome, timings: { ...e.timings } }),
    };
  }

  private end(e: Entry, reason: 'device_closed' | 'device_goodbye' | 'idle' | 'replaced' | 'shutdown'): void {
    if (this.entries.get(e.device) !== e) return;
    this.entries.delete(e.device);
    e.slot?.release();
    this.d.metrics.active.set(this.entries.size);
    this.d.voiceMetrics.ended.inc({ reason });
    e.session.close();
    e.transport.close();
    this.d.log.info({ deviceId: e.device.deviceId, reason }, 'conversation ended');
    if (reason === 'device_closed' || reason === 'replaced' || reason === 'shutdown' || reason === 'device_goodbye') return;
    // Idle: MQTT devices keep their link (a goodbye closes the UDP channel); a WebSocket session is over.
    if (e.transport.kind === 'udp') e.device.send(JSON.stringify({ type: 'goodbye', session_id: e.id }));
    else e.device.close(CLOSE_NORMAL, `voice session ended (${reason})`);
  }

  private endIdle(): void {
    const cutoff = Date.now() - this.d.config.idleTimeoutMs;
    for (const e of [...this.entries.values()]) if (e.lastAudioAt < cutoff && e.session.state !== 'busy') this.end(e, 'idle');
  }

  /** Shown on the device (the firmware ignores `type:"error"`), then its attempt ends. */
  private refuse(device: VoiceDevice, message: string): void {
    device.send(JSON.stringify(toDevice.alert('', message)));
    if (device.transport === 'mqtt') device.send(JSON.stringify({ type: 'goodbye', session_id: '' }));
    else device.close(CLOSE_VOICE_UNAVAILABLE, 'voice unavailable');
  }
}
