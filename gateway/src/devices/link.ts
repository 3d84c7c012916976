/** How a session reaches its device: transport only, no MCP. */
export interface DeviceLink {
  readonly transport: 'websocket' | 'mqtt';
  readonly remoteAddress: string;
  /** The address the device reached us on (MQTT: where its UDP audio may go too). */
  readonly localAddress?: string;
  /** Send one JSON text frame. Returns false when the link is closed and nothing was sent. */
  send(text: string): boolean;
  /** Send one binary (audio) frame, WebSocket links only. Returns false when nothing was sent. */
  sendBinary?(data: Buffer): boolean;
  /** Bytes queued on the socket and not yet written (audio is dropped above a bound). */
  bufferedBytes?(): number;
  /** Stop reading the socket and start again (a device past its frame budget: devices/read-budget.ts). */
  pauseReading?(): void;
  resumeReading?(): void;
  /** Close with a WebSocket close code (MQTT links just disconnect). */
  close(code: number, reason: string): void;
}

/** Every WebSocket close code the gateway sends, in one list (1000-1011 are RFC 6455's, 4000-4999 ours). */
export const CLOSE_NORMAL = 1000;
export const CLOSE_REPLACED = 4000;
export const CLOSE_NO_HELLO = 4002;
export const CLOSE_SHUTDOWN = 1001;
/** A new connection for a device whose live connection proved other credentials. */
export const CLOSE_TAKEOVER_REFUSED = 4003;
/** An operator revoked the device's credentials (re-enroll). */
export const CLOSE_REVOKED = 4004;
/** An operator forgot the device (DELETE /v1/devices/{id}); if it dials again it is recorded as new. */
export const CLOSE_FORGOTTEN = 4006;
/** A device whose voice session could not be relayed or answered (the alert said why). */
export const CLOSE_VOICE_UNAVAILABLE = 4005;
/** The server hit an unexpected condition (a frame handler threw). */
export const CLOSE_INTERNAL_ERROR = 1011;
