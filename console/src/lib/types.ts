/**
 * The API's wire types as the console reads them. The gateway defines them in zod
 * (gateway/src/api/schemas.ts, tools.ts, enrollments.ts, history.ts); these mirror the fields the console
 * uses, and the console talks to the gateway only over HTTP.
 */
import type { FleetEventType } from './fleet-types.js';

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
}

export interface Device {
  id: string;
  clientId: string;
  transport: 'websocket' | 'mqtt';
  online: boolean;
  state: string;
  connectedAt: string;
  lastSeenAt: string;
  server: { name: string; version: string } | null;
  protocolVersion: string | null;
  firmwareVersion: string | null;
  toolCount: number;
  toolsHash: string | null;
  pendingCalls: number;
  /** Present when the catalog is incomplete: the device refused part of its tool list for good ("catalog incomplete: tool after X refused by the device"), or a byte bound cut or refused it ("catalog cut: …", "catalog refused: …"). */
  catalogWarning?: string;
}
export interface DeviceList {
  devices: Device[];
  nextCursor?: string;
}

export interface Tool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  annotations?: Record<string, unknown>;
  userOnly: boolean;
}
export interface ToolList {
  tools: Tool[];
  hash: string;
}

/** A tool of the hub (GET /v1/tools): a hosted server's (mcp__server__tool), a device's, or the generic ones. */
export interface HubTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  title?: string;
  annotations?: Record<string, unknown>;
  source: Record<string, unknown>;
}
export interface HubToolList {
  tools: HubTool[];
}

export interface CallResult {
  content: Array<Record<string, unknown>>;
  isError: boolean;
  structuredContent?: Record<string, unknown>;
  durationMs: number;
}

export type EventType =
  | 'device.online'
  | 'device.ready'
  | 'device.offline'
  | 'device.tools_changed'
  | 'device.catalog_incomplete'
  | 'device.notification'
  | 'device.message'
  | 'device.photo'
  | 'voice.transcript'
  | 'voice.tool'
  | 'voice.reply';
export const EVENT_TYPES: readonly EventType[] = [
  'device.online',
  'device.ready',
  'device.offline',
  'device.tools_changed',
  'device.catalog_incomplete',
  'device.notification',
  'device.message',
  'device.photo',
  'voice.transcript',
  'voice.tool',
  'voice.reply',
];
export interface GatewayEvent {
  id: string;
  /** Fleet events (fleet-types.ts) arrive on gateways that have those routes. */
  type: EventType | FleetEventType;
  deviceId: string;
  at: string;
  data: Record<string, unknown>;
}

/** A device refused at connect for lack of valid credentials (GET /v1/enrollments/refused). */
export interface RefusedDevice {
  deviceId: string;
  clientId: string;
  transport: 'websocket' | 'mqtt';
  reason: string;
  count: number;
  firstAt: string;
  lastAt: string;
  remoteAddress: string;
}

export interface PendingEnrollment {
  code: string;
  deviceId: string;
  clientId: string;
  status: 'pending' | 'rejected';
  createdAt: string;
  expiresAt: string;
  remoteAddress: string;
  userAgent?: string;
  firmwareVersion?: string;
}
export interface EnrolledDevice {
  deviceId: string;
  clientId: string;
  via: 'open' | 'approve' | 'allowlist';
  enrolledAt: string;
  delivered: boolean;
}

export interface HostedServer {
  name: string;
  type: string;
  state: string;
  lastError: string | null;
  toolCount: number;
  tools: string[];
  restarts: number;
  pid: number | null;
  since: string;
  serverInfo: { name: string; version: string } | null;
}

export interface MetricSample {
  at: string;
  devicesOnline: Record<string, number>;
  callsPerSecond: Record<string, number>;
  callLatencyMs: number | null;
  eventsPerSecond: number;
}
export interface MetricHistory {
  intervalMs: number;
  capacity: number;
  samples: MetricSample[];
}

export interface Photo {
  id: string;
  deviceId: string;
  at: string;
  bytes: number;
  mimeType: string;
  question: string;
}

/** GET /v1/devices/{id}/firmware: what the device's next OTA check would be offered. */
export interface FirmwarePreview {
  deviceId: string;
  reported: { version: string | null; boards: string[] } | null;
  source: 'rollout' | 'baseline' | 'none';
  offer: { version: string; url: string; force?: number; size?: number; sha256?: string };
  rollout: { version: string; percent: number; listed: boolean; bucket: number } | null;
}

/** PATCH /v1/devices/{id}: the device's settings after the change (an empty body changes nothing: a read). */
export interface DeviceSettings {
  id: string;
  voiceMode: 'off' | 'relay' | 'converse' | null;
  effectiveVoiceMode: 'off' | 'relay' | 'converse';
}

/** An MCP endpoint token (GET /v1/mcp/endpoints): a tool process dials in with it and serves its tools. */
export interface McpEndpoint {
  id: string;
  name: string;
  tenant: string | null;
  allowedTools: string[] | null;
  createdAt: string;
  state: 'connected' | 'waiting';
  lastError: string | null;
  toolCount: number;
  tools: string[];
}
/** POST /v1/mcp/endpoints: the token is shown once (the gateway keeps only its hash). */
export interface McpEndpointCreated {
  id: string;
  name: string;
  token: string;
  url: string;
}
