import { randomBytes, randomUUID } from 'node:crypto';
import { buildGoodbye, buildNoVoiceUdpHello, buildServerHello } from '@voxgate/protocol';
import type { Logger } from 'pino';
import { REFUSAL_LINES, ThrottledLog } from '../throttle/throttled-log.js';
import type { VoiceDevice, VoiceHook } from './voice-hook.js';

/**
 * The voice hook when voice.mode is off: a WebSocket device's hello gets the server hello (its MCP starts);
 * an MQTT device asking for a voice session is told at once that there is none. Audio and other JSON are
 * not taken (the session counts audio and publishes the JSON as events). One serves every session.
 */
export class NoVoiceHook implements VoiceHook {
  /** Every device of a fleet may ask: at most REFUSAL_LINES' lines, the rest counted in the next one. */
  private readonly log: ThrottledLog;

  constructor(log: Logger) {
    this.log = new ThrottledLog(log, 'info', REFUSAL_LINES);
  }

  onHello(device: VoiceDevice): boolean {
    if (device.transport === 'mqtt') {
      // Voice (UDP audio) is not enabled: end the device's wait for a server hello at once (a goodbye alone
      // would block its main task, and every MCP reply, for 10 s), then close it.
      const line = 'device asked for a voice session over MQTT; voice is not enabled, answering a no-voice hello and goodbye';
      this.log.write({ deviceId: device.deviceId }, line);
      endUdpVoiceRequest(device);
      return false;
    }
    device.send(JSON.stringify(buildServerHello(device.sessionId)));
    return true;
  }

  onJson(): boolean {
    return false;
  }

  onAudio(): boolean {
    return false;
  }

  onClosed(): void {}
}

/**
 * Refuse an MQTT device's voice hello so that its OpenAudioChannel returns at once: the firmware's main task waits
 * up to 10 s for a server hello (every MCP reply of the device waits with it), and only a complete UDP hello ends
 * that wait (buildNoVoiceUdpHello: one it cannot connect with). `before` (an alert) goes next, then a goodbye with
 * the hello's session id, which closes the channel on any network stack that did connect.
 */
export function endUdpVoiceRequest(device: Pick<VoiceDevice, 'send'>, before?: object): void {
  const voiceSession = randomUUID();
  device.send(JSON.stringify(buildNoVoiceUdpHello(voiceSession, randomBytes(16), randomBytes(16))));
  if (before) device.send(JSON.stringify(before));
  device.send(JSON.stringify(buildGoodbye(voiceSession)));
}
