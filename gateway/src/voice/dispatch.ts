import type { DeviceFrame } from '@voxgate/protocol';
import type { VoiceDevice, VoiceHook } from '../devices/voice-hook.js';
import type { VoiceMode } from './converse/config.js';
import type { StaleChannelGoodbye } from './stale-channel.js';

/**
 * Chooses, per voice session, who answers it: the relay, the conversation, or nobody (mode "off"), by the
 * device's mode at its hello (device, then tenant, then voice.mode). The choice holds for the session.
 */
export class VoiceModeRouter implements VoiceHook {
  private readonly owner = new Map<VoiceDevice, VoiceHook>();

  constructor(
    private readonly d: {
      modeOf(deviceId: string): VoiceMode;
      relay?: VoiceHook | undefined;
      converse?: VoiceHook | undefined;
      /** Mode "off" (or a mode this gateway cannot serve): devices/no-voice-hook.ts. */
      off: VoiceHook;
      /** Answers an MQTT device's channel messages that no session on this connection takes (stale-channel.ts). */
      stale?: StaleChannelGoodbye | undefined;
    },
  ) {}

  onHello(device: VoiceDevice, frame: DeviceFrame): boolean | Promise<boolean> {
    const mode = this.d.modeOf(device.deviceId);
    const hook = mode === 'relay' ? this.d.relay : mode === 'converse' ? this.d.converse : undefined;
    const previous = this.owner.get(device);
    if (previous && previous !== hook) {
      this.owner.delete(device);
      previous.onClosed(device);
    }
    if (!hook) return this.d.off.onHello(device, frame);
    this.owner.set(device, hook);
    return hook.onHello(device, frame);
  }

  onJson(device: VoiceDevice, frame: DeviceFrame, text: string): boolean {
    const hook = this.owner.get(device);
    if (hook) return hook.onJson(device, frame, text);
    // Not taken: it goes on to the events, as before.
    this.d.stale?.offer(device, frame);
    return false;
  }

  onAudio(device: VoiceDevice, data: Buffer): boolean {
    return this.owner.get(device)?.onAudio(device, data) ?? false;
  }

  onClosed(device: VoiceDevice): void {
    const hook = this.owner.get(device);
    this.owner.delete(device);
    hook?.onClosed(device);
  }
}
