import type { Store } from '../store/store.js';
import type { ConverseConfig, VoiceMode } from './converse/config.js';
import { VOICE_MODES } from './converse/config.js';
import type { DeviceProfile } from './converse/converse.js';

/** Persisted per-device voice settings (`PATCH /v1/devices/{id} {voiceMode}`), one document per device. */
export const DEVICE_VOICE_COLLECTION = 'device-voice';

export interface DeviceVoiceSettings {
  voiceMode?: VoiceMode | undefined;
}

/** Per-device modes in memory, written through to the store; a shared store's changes are followed. */
export class DeviceVoiceModes {
  private readonly modes = new Map<string, VoiceMode>();
  private store: Store | undefined;

  /**
   * The store opens after the device registry: modes are read from it once it is there. With the device records, a
   * device forgotten (DELETE, or past devices.maxKnown) loses its mode with its record: it comes back as a new device.
   */
  async attach(store: Store, records?: { onForgotten(fn: (deviceId: string) => void): () => void }): Promise<void> {
    this.store = store;
    records?.onForgotten((id) => {
      if (this.modes.has(id)) void this.set(id, null).catch(() => undefined); // a failed delete leaves the row: the next forget retries
    });
    for (const { key, value } of await store.list(DEVICE_VOICE_COLLECTION)) this.apply(key, value);
    store.onChange?.(DEVICE_VOICE_COLLECTION, (c) => this.apply(c.key, c.value));
  }

  get(deviceId: string): VoiceMode | undefined {
    return this.modes.get(deviceId);
  }

  /** Set (or clear, with null) a device's mode. */
  async set(deviceId: string, mode: VoiceMode | null): Promise<void> {
    if (mode === null) {
      this.modes.delete(deviceId);
      await this.store?.delete(DEVICE_VOICE_COLLECTION, deviceId);
      return;
    }
    this.modes.set(deviceId, mode);
    await this.store?.put(DEVICE_VOICE_COLLECTION, deviceId, { voiceMode: mode } satisfies DeviceVoiceSettings);
  }

  private apply(key: string, value: unknown): void {
    const mode = (value as DeviceVoiceSettings | undefined)?.voiceMode;
    if (mode && (VOICE_MODES as readonly string[]).includes(mode)) this.modes.set(key, mode);
    else this.modes.delete(key);
  }
}

type ProfileConfig = Pick<ConverseConfig, 'mode' | 'tenants' | 'language' | 'hubTenant' | 'tts'> & { asr: { language?: string | undefined } };

/**
 * A device's voice tenant: the voice tenant that lists it, else the tenant the device belongs to
 * (devices/tenants.ts), else voice.hubTenant. A conversation's turns run with this tenant's rights: a
 * device of one tenant never reaches another tenant's devices or servers by speaking.
 */
export function voiceTenantOf(c: ProfileConfig, deviceId: string, deviceTenant?: string): string | undefined {
  for (const [name, t] of Object.entries(c.tenants)) if (t.devices.includes(deviceId)) return name;
  return deviceTenant ?? c.hubTenant;
}

/** The device's own mode, else its tenant's, else voice.mode. */
export function voiceModeOf(c: ProfileConfig, modes: DeviceVoiceModes, deviceId: string, deviceTenant?: string): VoiceMode {
  const own = modes.get(deviceId);
  if (own) return own;
  const tenant = voiceTenantOf(c, deviceId, deviceTenant);
  return (tenant !== undefined ? c.tenants[tenant]?.mode : undefined) ?? c.mode;
}

export function voiceProfileOf(c: ProfileConfig, deviceId: string, deviceTenant?: string): DeviceProfile & { persona?: string | undefined } {
  const tenant = voiceTenantOf(c, deviceId, deviceTenant);
  const t = tenant !== undefined ? c.tenants[tenant] : undefined;
  return { tenant, language: t?.language ?? c.language ?? c.asr.language, voice: t?.voice, persona: t?.persona };
}
