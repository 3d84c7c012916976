import type { DeviceFrame, InitializeResult, VisionCapability } from '@voxgate/protocol';
import type { CatalogTool, ToolCatalog } from './catalog.js';
import type { CallOutcome } from './device-handle.js';
import type { SessionState } from './settings.js';

/**
 * What a voice hook sees of a device: its ids and link (text, audio, back-pressure, close), its MCP as the
 * gateway holds it (catalog, initialize result, calls), never the session's internals.
 */
export interface VoiceDevice {
  readonly deviceId: string;
  readonly clientId: string;
  /** The MCP envelope's session id this connection's frames carry. */
  readonly sessionId: string;
  readonly state: SessionState;
  readonly transport: 'websocket' | 'mqtt';
  readonly remoteAddress: string;
  /** The address the device reached us on (MQTT: where its UDP audio may go too). */
  readonly localAddress?: string | undefined;
  readonly initialize?: InitializeResult | undefined;
  readonly catalog?: ToolCatalog | undefined;
  /** One JSON text frame; false when the link is closed. */
  send(text: string): boolean;
  /** One binary (audio) frame; false when nothing was sent (a link without binary frames, or closed). */
  sendBinary(data: Buffer): boolean;
  /** Bytes queued on the link and not yet written (0 when the link cannot tell). */
  bufferedBytes(): number;
  close(code: number, reason: string): void;
  /** Resolves once the catalog is loaded. */
  awaitReady(timeoutMs: number): Promise<void>;
  findTool(name: string): CatalogTool | undefined;
  call(name: string, args: Record<string, unknown>, opts?: { timeoutMs?: number }): Promise<CallOutcome>;
  rpc(method: string, params: Record<string, unknown> | undefined, opts?: { timeoutMs?: number }): Promise<unknown>;
  /** A voice server's vision endpoint for the device, unless the gateway's own vision wins. */
  applyVision(vision: VisionCapability, timeoutMs: number): Promise<'applied' | 'gateway'>;
}

/**
 * What a device session asks of its voice side: the voice relay when voice.mode is "relay" (voice/relay.ts),
 * else the default no-voice hook (devices/no-voice-hook.ts). The session keeps its MCP; the hook owns
 * everything about the voice session: the hello's answer, JSON and audio relay.
 */
export interface VoiceHook {
  /**
   * The device's hello. True (or a promise of true) once the device has its server hello (MCP may start),
   * false when no voice session was opened (the device was told why). Never rejects.
   */
  onHello(device: VoiceDevice, hello: DeviceFrame): boolean | Promise<boolean>;
  /** A JSON frame from the device other than hello and mcp; true when it belonged to a voice session. */
  onJson(device: VoiceDevice, frame: DeviceFrame, text: string): boolean;
  /** A binary (audio) frame from a WebSocket device; false when no voice session takes it. */
  onAudio(device: VoiceDevice, data: Buffer): boolean;
  onClosed(device: VoiceDevice): void;
}
