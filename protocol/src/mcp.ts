import { z } from 'zod';
import { safeJsonText } from './json.js';

/** The MCP revision the gateway asks for; reference devices answer 2024-11-05 whatever is asked. */
export const GATEWAY_PROTOCOL_VERSION = '2024-11-05';
export const TOOL_NAME_MAX = 128;

/** A device's capabilities are kept whole up to this many characters of JSON (the firmware's: `{"tools":{}}`), else as `{}`. */
export const MAX_CAPABILITIES_CHARS = 4096;

/**
 * A device's initialize answer, as the gateway keeps it for the device's whole connection and publishes it (`device.ready`
 * carries its serverInfo): its MCP fields only, each bounded. Members MCP does not define are dropped, at the top and in
 * serverInfo, and capabilities past MAX_CAPABILITIES_CHARS are dropped whole: both were kept as sent, so one answer
 * of a frame's size (256 KiB over MQTT) was held per connection and sat in every device.ready event (red team 11).
 */
export const InitializeResultSchema = z.object({
  protocolVersion: z.string().max(64).catch('unknown'),
  capabilities: z
    .record(z.string(), z.unknown())
    .refine((c) => safeJsonText(c, '').length <= MAX_CAPABILITIES_CHARS)
    .catch({}),
  serverInfo: z
    .object({ name: z.string().max(256).catch('unknown'), version: z.string().max(128).catch('unknown') })
    .catch({ name: 'unknown', version: 'unknown' }),
  instructions: z.string().max(16_384).optional().catch(undefined),
});
export type InitializeResult = z.infer<typeof InitializeResultSchema>;

export const ToolAnnotationsSchema = z
  .object({
    audience: z.array(z.string().max(32)).max(8).optional(),
    title: z.string().max(256).optional(),
    readOnlyHint: z.boolean().optional(),
    destructiveHint: z.boolean().optional(),
    idempotentHint: z.boolean().optional(),
    openWorldHint: z.boolean().optional(),
  })
  .loose();

export const ToolSchema = z
  .object({
    name: z.string().min(1).max(TOOL_NAME_MAX),
    title: z.string().max(256).optional(),
    description: z.string().max(16_384).optional(),
    inputSchema: z.record(z.string(), z.unknown()).default({ type: 'object' }),
    outputSchema: z.record(z.string(), z.unknown()).optional(),
    annotations: ToolAnnotationsSchema.optional(),
  })
  .loose();
export type Tool = z.infer<typeof ToolSchema>;

export const ToolsListResultSchema = z
  .object({
    tools: z.array(ToolSchema).max(1024),
    /** Absent on the last page (the reference firmware omits it; an empty string also ends the walk). */
    nextCursor: z.string().max(1024).optional(),
  })
  .loose();
export type ToolsListResult = z.infer<typeof ToolsListResultSchema>;

export const ContentBlockSchema = z.object({ type: z.string().max(64) }).loose();
export type ContentBlock = z.infer<typeof ContentBlockSchema>;

export const CallToolResultSchema = z
  .object({
    content: z.array(ContentBlockSchema).max(256).default([]),
    isError: z.boolean().optional(),
    structuredContent: z.record(z.string(), z.unknown()).optional(),
  })
  .loose();
export type CallToolResult = z.infer<typeof CallToolResultSchema>;

/** A tool the device marks for people only (`annotations.audience: ["user"]`): never for an LLM. */
export function isUserOnlyTool(tool: Tool): boolean {
  const audience = tool.annotations?.audience;
  return Array.isArray(audience) && audience.includes('user') && !audience.includes('assistant');
}

export interface VisionCapability {
  url: string;
  token?: string;
}

export function buildInitializeParams(clientInfo: { name: string; version: string }, vision?: VisionCapability) {
  const capabilities: Record<string, unknown> = {};
  if (vision) capabilities['vision'] = vision.token ? { url: vision.url, token: vision.token } : { url: vision.url };
  return { protocolVersion: GATEWAY_PROTOCOL_VERSION, capabilities, clientInfo };
}

/** The MCP content items a standard client accepts (2025-06-18 `ContentBlock`), as the gateway passes them on. */
const Annotations = z.record(z.string(), z.unknown()).optional();
export const McpContentSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text'), text: z.string(), annotations: Annotations }),
  z.object({ type: z.literal('image'), data: z.string(), mimeType: z.string().min(1).max(128), annotations: Annotations }),
  z.object({ type: z.literal('audio'), data: z.string(), mimeType: z.string().min(1).max(128), annotations: Annotations }),
  z.object({ type: z.literal('resource_link'), uri: z.string(), name: z.string(), annotations: Annotations }).loose(),
  z.object({
    type: z.literal('resource'),
    resource: z.union([z.object({ uri: z.string(), text: z.string() }).loose(), z.object({ uri: z.string(), blob: z.string() }).loose()]),
    annotations: Annotations,
  }),
]);
export type McpContent = z.infer<typeof McpContentSchema>;
