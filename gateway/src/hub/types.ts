import type { LoggingMessageNotificationParams, Prompt, Resource, ResourceTemplateType } from '@modelcontextprotocol/client';
import type { DeviceDirectory, ReadyDevice } from '../devices/directory.js';

export type DeviceToolMode = 'per_device' | 'generic' | 'both';

/** A caller: its tenant (from its API key), if any. */
export interface Caller {
  tenant?: string | undefined;
  /** No tenant, but not an operator: sees only devices without a tenant (principal.ts). */
  untenantedOnly?: boolean | undefined;
  /** The key behind the call (see principal.ts): who owns what the call starts. */
  principal?: string | undefined;
}

/** One tool in the provider-neutral list: what an LLM sees, plus where it goes. */
export interface HubTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  /** A hosted server's own fields, passed on unchanged. */
  title?: string;
  outputSchema?: Record<string, unknown>;
  annotations?: Record<string, unknown>;
  /** Every other field of a hosted server's tool definition (execution, icons, _meta, ...), unchanged. */
  fields?: Readonly<Record<string, unknown>>;
  source: { kind: 'server'; server: string; tool: string } | { kind: 'device'; deviceId: string; tool: string } | { kind: 'generic' };
  /** The server's `response_instruction`, for the assistant to add after this tool ran. */
  responseInstruction?: string;
  /** Listed in its server's `auto_context_tool`. */
  autoContext?: boolean;
}

export interface HubPrompt extends Prompt {
  server: string;
  /** The server's own prompt name. */
  prompt: string;
}
export interface HubResource extends Resource {
  server: string;
}
export interface HubResourceTemplate extends ResourceTemplateType {
  server: string;
}
export type LogListener = (server: string, params: LoggingMessageNotificationParams) => void;
export type ResourceUpdatedListener = (server: string, uri: string) => void;

export interface Instructions {
  system: Array<{ server: string; instruction: string }>;
  responseInstructions: Record<string, string>;
  autoContextTools: string[];
}

/** What the hub needs of the device registry (a port: tests give a small stand-in). */
export type HubDevices = Pick<DeviceDirectory, 'ready' | 'onChange' | 'page' | 'get' | 'device' | 'find' | 'describe'>;

/** Which devices a caller may see and act on (devices/tenants.ts through principal.ts canSee). */
export type DeviceVisibility = (caller: Caller, deviceId: string) => boolean;

/** A device as the namespace sees it: a local session, or (cluster) a ready device of another instance. */
export type ListedDevice = ReadyDevice;
