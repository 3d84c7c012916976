import { randomBytes, randomUUID } from 'node:crypto';
import { buildGoodbye, buildNoVoiceUdpHello, buildServerHello, type DeviceFrame } from '@voxgate/protocol';
import type { DeviceSession } from '../devices/session.js';
import type { VoiceHook } from '../devices/voice-hook.js';
import type { VoiceMode } from './converse/config.js';

/**
 * Chooses, per voice session, who answers it: the relay, the conversation, or nobody (mode "off"), by the
 * device's mode at its hello (device, then tenant, then voice.mode). The choice holds for the session.
 */
export class VoiceModeRouter implements VoiceHook {
  private readonly owner = new Map<DeviceSession, VoiceHook>();

  constructor(
    private readonly d: {
      modeOf(deviceId: string): VoiceMode;
      relay?: VoiceHook | undefined;
      converse?: VoiceHook | undefined;
    },
  ) {}

  async onHello(device: DeviceSession, frame: DeviceFrame): Promise<boolean> {
    const mode = this.d.modeOf(device.deviceId);
    const hook = mode === 'relay' ? this.d.relay : mode === 'converse' ? this.d.converse : undefined;
    const previous = this.owner.get(device);
    if (previous && previous !== hook) {
      this.owner.delete(device);
      previous.onClosed(device);
    }
    if (!hook) return this.answerWithoutVoice(device);
    this.owner.set(device, hook);
    return hook.onHello(device, frame);
  }

  onJson(device: DeviceSession, frame: DeviceFrame, text: string): boolean {
    return this.owner.get(device)?.onJson(device, frame, text) ?? false;
  }

  onAudio(device: DeviceSession, data: Buffer): boolean {
    return this.owner.get(device)?.onAudio(device, data) ?? false;
  }

  onClosed(device: DeviceSession): void {
    const hook = this.owner.get(device);
    this.owner.delete(device);
    hook?.onClosed(device);
  }

  /** Mode "off" (or a mode this gateway cannot serve): what the session answers with no voice configured. */
  private answerWithoutVoice(device: DeviceSession): boolean {
    if (device.link.transport === 'mqtt') {
      const id = randomUUID();
      device.link.send(JSON.stringify(buildNoVoiceUdpHello(id, randomBytes(16), randomBytes(16))));
      device.link.send(JSON.stringify(buildGoodbye(id)));
      return false;
    }
    device.link.send(JSON.stringify(buildServerHello(device.sessionId)));
    return true;
  }
}
