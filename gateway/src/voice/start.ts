import type { Logger } from 'pino';
import type { Assistant } from '../assistant/assistant.js';
import type { DeviceTenancy } from '../devices/tenants.js';
import type { VoiceHook } from '../devices/voice-hook.js';
import type { EventBus } from '../events/bus.js';
import type { Metrics } from '../metrics.js';
import type { Store } from '../store/store.js';
import type { ModelGates } from '../throttle/model-gates.js';
import { assistantTurns } from './converse/assistant-port.js';
import { voiceConfigured, type VoiceMode } from './converse/config.js';
import { Converse, type ConverseKit } from './converse/converse.js';
import { createConverseMetrics, type ConverseMetrics } from './converse/metrics.js';
import { NoVoiceHook } from '../devices/no-voice-hook.js';
import { VoiceModeRouter } from './dispatch.js';
import { StaleChannelGoodbye } from './stale-channel.js';
import { createVoiceMetrics, type VoiceMetrics } from './metrics.js';
import { DeviceVoiceModes, voiceModeOf, voiceProfileOf } from './modes.js';
import { VoiceRelay, type VoiceConfig } from './relay.js';
import type { HubPort } from './upstream-mcp.js';
import { UdpAudio } from './udp-audio.js';
import { VoiceTenantShares } from './tenant-shares.js';

export interface Voice {
  /** What device sessions call: routes each voice session to the relay, the conversation, or neither. */
  hook: VoiceHook;
  relay: VoiceRelay | undefined;
  converse: Converse;
  /** Per-device modes (`PATCH /v1/devices/{id} {voiceMode}`). */
  modes: DeviceVoiceModes;
  /** The mode a device's next voice session uses. */
  modeOf(deviceId: string): VoiceMode;
  metrics: VoiceMetrics;
  /** Voice sessions per device tenant (voice.maxSessionsPerTenant), relay and conversation together. */
  shares: VoiceTenantShares;
  /** The UDP audio socket for MQTT devices (bound when a configured mode needs voice). */
  udp: UdpAudio | undefined;
  /** The store, and the device records (a forgotten device's voice mode goes with it). */
  useStore(store: Store, records?: { onForgotten(fn: (deviceId: string) => void): () => void }): Promise<void>;
  useHub(hub: HubPort): void;
  useAssistant(assistant: Assistant, bus: EventBus): void;
  /** Devices' tenants (devices/tenants.ts): a device without a voice tenant talks with its own tenant's rights. */
  useTenancy(tenancy: DeviceTenancy): void;
  close(): void;
}

/**
 * Voice: the relay (voice.upstream.url set), the conversation (mode "converse"), one UDP socket for MQTT
 * devices' audio, and the per-device mode router in front. The audio kit (codecs, providers) is built at the
 * first conversation, so a gateway that never converses never loads it.
 */
export async function startVoice(
  config: VoiceConfig,
  metrics: Metrics,
  log: Logger,
  o: { kit?: () => ConverseKit | Promise<ConverseKit>; gates?: Pick<ModelGates, 'asr' | 'tts'> | undefined } = {},
): Promise<Voice> {
  const voiceMetrics = createVoiceMetrics(metrics.registry);
  const voiceLog = log.child({ component: 'voice' });
  const udp = voiceConfigured(config) ? await UdpAudio.start(config, voiceMetrics, voiceLog) : undefined;
  const shares = new VoiceTenantShares(config, voiceMetrics, voiceLog);
  const relay = config.upstream.url ? new VoiceRelay({ config, log: voiceLog, metrics: voiceMetrics, shares, ...(udp ? { udp } : {}) }) : undefined;
  const modes = new DeviceVoiceModes();
  let tenancy: DeviceTenancy = { tenantOf: () => undefined };
  const converseMetrics = createConverseMetrics(metrics.registry);
  const kit = lazyKit(o.kit ?? (() => loadConverseKit(config, voiceLog, converseMetrics)));
  const converse = new Converse({
    config,
    log: voiceLog,
    metrics: converseMetrics,
    voiceMetrics,
    kit: () => kit.get(),
    udp,
    profile: (deviceId) => voiceProfileOf(config, deviceId, tenancy.tenantOf(deviceId)),
    gates: o.gates,
    shares,
  });
  const modeOf = (id: string) => voiceModeOf(config, modes, id, tenancy.tenantOf(id));
  const hook = new VoiceModeRouter({ modeOf, relay, converse, off: new NoVoiceHook(voiceLog), stale: new StaleChannelGoodbye(voiceLog) });
  if (relay) log.info({ upstream: redactedUrl(config.upstream.url!), udp: udp ? `${config.udp.host}:${udp.port}` : 'off' }, 'voice relay on');
  if (config.mode === 'converse')
    log.info({ asr: config.asr.provider, tts: config.tts.provider, udp: udp ? `${config.udp.host}:${udp.port}` : 'off' }, 'voice conversation on');
  return {
    hook,
    relay,
    converse,
    modes,
    modeOf,
    metrics: voiceMetrics,
    shares,
    udp,
    useStore: (store, records) => modes.attach(store, records),
    useHub: (hub) => relay?.useHub(hub),
    useTenancy: (t) => {
      tenancy = t;
      shares.useTenancy(t);
      relay?.useTenancy((id) => t.tenantOf(id));
    },
    useAssistant(assistant, bus) {
      converse.useTurns(
        (deviceId) => {
          const p = voiceProfileOf(config, deviceId, tenancy.tenantOf(deviceId));
          return assistantTurns(assistant, { model: config.model, persona: p.persona ?? config.persona }, p);
        },
        (type, deviceId, data) => void bus.publish(type, deviceId, data),
      );
    },
    close: () => {
      relay?.close();
      converse.close();
      kit.close();
      udp?.close();
    },
  };
}

/** The audio kit, made at the first conversation; one made while the gateway closed is closed at once. */
function lazyKit(make: () => ConverseKit | Promise<ConverseKit>): { get(): ConverseKit | Promise<ConverseKit>; close(): void } {
  let kit: ConverseKit | undefined;
  let loading: Promise<ConverseKit> | undefined;
  let closed = false;
  return {
    get() {
      if (kit) return kit;
      const made = make();
      if (!(made instanceof Promise)) return (kit = made);
      return (loading ??= made.then(
        (k) => {
          if (closed) k.close?.(); // the gateway closed while the code loaded: nothing may keep running
          return (kit = k);
        },
        (e: unknown) => {
          loading = undefined; // the next conversation tries again
          throw e;
        },
      ));
    },
    close() {
      closed = true;
      kit?.close?.();
    },
  };
}

/**
 * The conversation's audio kit, its code imported here at the first conversation: the Opus codec (@evan/opus), the
 * speech providers and their SDKs (openai, mpg123-decoder) stay out of a gateway that never converses (issue 21).
 */
async function loadConverseKit(config: VoiceConfig, log: Logger, metrics: ConverseMetrics): Promise<ConverseKit> {
  const code = await import('./converse/kit.js').catch((e: unknown) => {
    throw new Error(`the conversation's audio kit (codecs, speech providers) could not be loaded: ${e instanceof Error ? e.message : String(e)}`);
  });
  return code.createConverseKit(config, log, metrics);
}

/** The voice server's URL without credentials or query (a token may ride there). */
function redactedUrl(url: string): string {
  const u = new URL(url);
  return `${u.protocol}//${u.host}${u.pathname}`;
}
