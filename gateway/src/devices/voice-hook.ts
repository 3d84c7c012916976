import type { DeviceFrame } from '@voxgate/protocol';
import type { DeviceSession } from './session.js';

/**
 * What a device session asks of a voice relay when one is configured (voice/relay.ts). The session keeps
 * its MCP; the relay owns everything about the voice session: the hello's answer, JSON and audio relay.
 */
export interface VoiceHook {
  /**
   * The device's hello. Resolves true once the device has its server hello (MCP may start), false when the
   * voice session was refused (the device was told why). Never rejects.
   */
  onHello(session: DeviceSession, hello: DeviceFrame): Promise<boolean>;
  /** A JSON frame from the device other than hello and mcp; true when it belonged to a voice session. */
  onJson(session: DeviceSession, frame: DeviceFrame, text: string): boolean;
  /** A binary (audio) frame from a WebSocket device; false when no voice session takes it. */
  onAudio(session: DeviceSession, data: Buffer): boolean;
  onClosed(session: DeviceSession): void;
}
