import { buildGoodbye, type DeviceFrame } from '@voxgate/protocol';
import type { Logger } from 'pino';
import type { VoiceDevice } from '../devices/voice-hook.js';

/** What the firmware sends on an audio channel it believes open (application.cc: listen start/stop/detect, abort). */
const CHANNEL_TYPES: ReadonlySet<string> = new Set(['listen', 'abort']);

/**
 * An MQTT device whose UDP audio channel outlived its voice session here: the gateway restarted, or the device's MQTT
 * link dropped and came back (the session ended with the link), while the firmware kept its channel. It then sends
 * `listen` and `abort` on it, its audio goes nowhere, and it hears nothing until its 120 s channel timeout
 * (Protocol::IsTimeout). A goodbye naming the session id it sent closes the channel at once (MqttProtocol closes on a
 * goodbye for its own session_id), so the next wake word opens a fresh session. 78/xiaozhi-mqtt-gateway answers a
 * device's JSON with no session behind it the same way. Only where no hook answered a hello on this connection (a
 * session being opened is never told goodbye), once per session id per connection: a device cannot make the gateway
 * send more than it sends.
 */
export class StaleChannelGoodbye {
  private readonly answered = new WeakMap<VoiceDevice, string>();

  constructor(private readonly log: Logger) {}

  offer(device: VoiceDevice, frame: DeviceFrame): void {
    if (device.transport !== 'mqtt' || !CHANNEL_TYPES.has(frame.type)) return;
    const sid = frame.session_id;
    if (!sid || this.answered.get(device) === sid) return;
    this.answered.set(device, sid);
    device.send(JSON.stringify(buildGoodbye(sid)));
    this.log.debug({ deviceId: device.deviceId, type: frame.type }, 'audio channel with no voice session here: answered goodbye');
  }
}
