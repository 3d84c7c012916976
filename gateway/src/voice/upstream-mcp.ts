import { classifyRpc, type RpcId } from '@voxgate/protocol';
import { z } from 'zod';
import { GatewayError } from '../errors.js';
import type { CatalogTool } from '../devices/catalog.js';
import type { VoiceDevice } from '../devices/voice-hook.js';
import type { HubTool } from '../hub/hub.js';
import { compactDeviceId } from '../hub/names.js';
import { HttpUrl } from '../config/fields.js';
import type { VoiceMetrics } from './metrics.js';

/** The hub as the voice relay uses it (McpHub): its tool list for a tenant, and calls by namespaced name. */
export interface HubPort {
  tools(caller: Caller): HubTool[];
  call(name: string, args: Record<string, unknown>, ctx: Caller): Promise<{ content: unknown[]; isError?: boolean | undefined; structuredContent?: unknown }>;
}

/** Whose rights a voice server uses: the device's tenant; with none, devices without a tenant only (principal.ts). */
type Caller = { tenant?: string | undefined; untenantedOnly?: boolean | undefined };
const callerOf = (tenant: string | undefined): Caller => (tenant === undefined ? { untenantedOnly: true } : { tenant });

/** With voice.exposeHubTools: the hub, and the tenant whose tools the voice server may use. */
export interface HubExposure {
  hub: HubPort;
  tenant: string | undefined;
}

/** Tools per tools/list page answered to a voice server; the cursor is the next tool's name, as the device's is. */
export const UPSTREAM_TOOLS_PAGE = 64;
/** How long an upstream initialize/tools/list waits for the gateway's own initialization of the device. */
const READY_WAIT_MS = 10_000;

/** Methods counted under their own name; any other is counted as "other" (bounded label set). */
const KNOWN = new Set(['initialize', 'tools/list', 'tools/call']);

/** The vision endpoint a voice server hands the device in its initialize (xiaozhi-esp32-server does). */
const UpstreamVision = z.object({
  url: HttpUrl.max(2048),
  token: z.string().max(4096).optional(),
});

type Reply = { jsonrpc: '2.0'; id: RpcId; result: unknown } | { jsonrpc: '2.0'; id: RpcId; error: { code: number; message: string } };

/**
 * A voice server acting as the device's MCP client. Its requests never reach the device under their own
 * ids: `initialize` and `tools/list` are answered from the gateway's cached result; `tools/call` and any
 * other method run through the device's call queue under the gateway's ids, and the answer goes back under
 * the voice server's id, so two clients never collide on the device.
 * Resolves with the reply (undefined for notifications); never rejects.
 */
export async function answerUpstreamMcp(device: VoiceDevice, payload: unknown, metrics: VoiceMetrics, exposure?: HubExposure): Promise<Reply | undefined> {
  const c = classifyRpc(payload);
  if (!c.ok || c.message.kind !== 'request') {
    if (c.ok && c.message.kind === 'notification') metrics.upstreamMcp.inc({ method: 'notification', answer: 'dropped' });
    return undefined;
  }
  const { id, method } = c.message.msg;
  const params = (c.message.msg.params ?? {}) as Record<string, unknown>;
  const err = (code: number, message: string): Reply => ({ jsonrpc: '2.0', id, error: { code, message } });
  try {
    switch (method) {
      case 'initialize': {
        await device.awaitReady(READY_WAIT_MS);
        metrics.upstreamMcp.inc({ method, answer: 'cache' });
        const vision = visionOf(params);
        if (vision === undefined) return { jsonrpc: '2.0', id, result: device.initialize };
        // Which vision endpoint the device uses is told back in _meta: the gateway's own wins when set.
        const outcome = vision.success ? await device.applyVision(vision.data, READY_WAIT_MS) : 'invalid';
        return { jsonrpc: '2.0', id, result: { ...device.initialize, _meta: { 'voxgate/vision': outcome } } };
      }
      case 'tools/list': {
        await device.awaitReady(READY_WAIT_MS);
        metrics.upstreamMcp.inc({ method, answer: 'cache' });
        return { jsonrpc: '2.0', id, result: toolsPage(listFor(device, params, exposure), params) };
      }
      case 'tools/call': {
        const name = params['name'];
        const args = params['arguments'] ?? {};
        if (typeof name !== 'string' || typeof args !== 'object' || args === null || Array.isArray(args)) {
          metrics.upstreamMcp.inc({ method, answer: 'refused' });
          return err(-32602, 'tools/call needs a string name and object arguments');
        }
        // A hub tool runs in the gateway, answered as if the device had; everything else is the device's.
        const viaHub = exposure !== undefined && !device.findTool(name) && hubToolsFor(device, exposure).some((t) => t.name === name);
        const out = viaHub
          ? await exposure.hub.call(name, args as Record<string, unknown>, callerOf(exposure.tenant))
          : await device.call(name, args as Record<string, unknown>);
        metrics.upstreamMcp.inc({ method, answer: viaHub ? 'hub' : 'device' });
        const result: Record<string, unknown> = { content: out.content, isError: out.isError ?? false };
        if (out.structuredContent !== undefined) result['structuredContent'] = out.structuredContent;
        return { jsonrpc: '2.0', id, result };
      }
      default: {
        // Anything else goes to the device as it is, under a gateway id, and its answer comes back.
        const result = await device.rpc(method, c.message.msg.params as Record<string, unknown> | undefined);
        metrics.upstreamMcp.inc({ method: 'other', answer: 'device' });
        return { jsonrpc: '2.0', id, result };
      }
    }
  } catch (e) {
    metrics.upstreamMcp.inc({ method: KNOWN.has(method) ? method : 'other', answer: 'error' });
    if (!(e instanceof GatewayError)) return err(-32603, 'internal error');
    const code = typeof e.extra['rpcCode'] === 'number' ? e.extra['rpcCode'] : -32000;
    return err(code, e.message);
  }
}

function visionOf(params: Record<string, unknown>) {
  const caps = params['capabilities'];
  if (typeof caps !== 'object' || caps === null || !('vision' in caps)) return undefined;
  const v = UpstreamVision.safeParse((caps as { vision: unknown }).vision);
  return v.success
    ? ({ success: true, data: v.data.token === undefined ? { url: v.data.url } : { url: v.data.url, token: v.data.token } } as const)
    : ({ success: false } as const);
}

interface ListedTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  annotations?: Record<string, unknown> | undefined;
}

/** The device's own tools (user-only ones only with `withUserTools`, as the firmware pages), then the hub's. */
function listFor(device: VoiceDevice, params: Record<string, unknown>, exposure: HubExposure | undefined): ListedTool[] {
  const own: readonly CatalogTool[] = device.catalog?.tools ?? [];
  const tools: ListedTool[] = params['withUserTools'] === true ? [...own] : own.filter((t) => !t.userOnly);
  if (!exposure) return tools;
  const taken = new Set(own.map((t) => t.name));
  for (const t of hubToolsFor(device, exposure))
    if (!taken.has(t.name)) tools.push({ name: t.name, description: t.description, inputSchema: t.inputSchema, annotations: t.annotations });
  return tools;
}

/** The hub's tools for the tenant, less this device's own (the voice server already has them under their names). */
function hubToolsFor(device: VoiceDevice, exposure: HubExposure): HubTool[] {
  return exposure.hub
    .tools(callerOf(exposure.tenant))
    .filter((t) => !(t.source.kind === 'device' && compactDeviceId(t.source.deviceId) === compactDeviceId(device.deviceId)));
}

/** One page from `cursor` (a tool name, as the firmware's) on. */
function toolsPage(tools: readonly ListedTool[], params: Record<string, unknown>): { tools: unknown[]; nextCursor?: string } {
  const cursor = typeof params['cursor'] === 'string' ? params['cursor'] : undefined;
  let start = 0;
  if (cursor !== undefined) {
    start = tools.findIndex((t) => t.name === cursor);
    if (start < 0) return { tools: [] };
  }
  const page = tools.slice(start, start + UPSTREAM_TOOLS_PAGE);
  const next = tools[start + UPSTREAM_TOOLS_PAGE];
  const wire = page.map((t) => ({
    name: t.name,
    description: t.description,
    inputSchema: t.inputSchema,
    ...(t.annotations ? { annotations: t.annotations } : {}),
  }));
  return next ? { tools: wire, nextCursor: next.name } : { tools: wire };
}
