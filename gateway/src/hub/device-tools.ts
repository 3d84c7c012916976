import { normalizeDeviceId } from '@voxgate/protocol';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { GatewayError } from '../errors.js';
import { ownPage, visiblePage } from '../devices/scoped-directory.js';
import type { Caller, HubDevices } from './types.js';
import type { CallContext } from './upstream/base.js';

/** The generic device tools (`devices_list`, `device_call`) and calls to one device's tool. */
export class DeviceTools {
  constructor(
    private readonly d: {
      registry: HubDevices;
      deviceCallTimeoutMs: number;
      devicesListMax: number;
      sees: (caller: Caller, deviceId: string) => boolean;
      /** A tenant's device ids, sorted (devices/tenants.ts): a tenant's list reads these, not the fleet filtered. */
      devicesOf?: (tenant: string) => readonly string[];
    },
  ) {}

  /** One page: a fleet of thousands must not become one tool result (an LLM's context, a /mcp message). */
  list(args: Record<string, unknown>, caller: Caller): CallToolResult {
    const onlineOnly = args['online_only'] !== false;
    const room = typeof args['room'] === 'string' && args['room'] !== '' ? args['room'].slice(0, 64) : undefined;
    const filter = { ...(onlineOnly ? { online: true } : {}), ...(room !== undefined ? { room } : {}) };
    const visible = (id: string) => this.d.sees(caller, id);
    const opts = { limit: this.d.devicesListMax, after: undefined };
    const own = caller.tenant === undefined ? undefined : this.d.devicesOf?.(caller.tenant);
    const page = own ? ownPage(this.d.registry, own, filter, opts, visible) : visiblePage(this.d.registry, filter, opts, visible);
    const devices = page.devices.map((d) => {
      const session = d.online ? this.d.registry.find(d.id) : undefined;
      const tools =
        session?.catalog?.tools.filter((x) => !x.userOnly).map((x) => ({ name: x.name, description: x.description, inputSchema: x.inputSchema })) ?? [];
      // What people call it: how "the living-room speaker" is found.
      const { name, room: where, tags } = d;
      return { device_id: d.id, name, room: where, tags, online: d.online, state: d.state, board: d.server?.name ?? null, tools };
    });
    const listed =
      page.next === undefined
        ? { devices }
        : { devices, truncated: true, note: `only the first ${this.d.devicesListMax} devices are listed; call device_call with any device id` };
    return { content: [{ type: 'text', text: JSON.stringify(listed) }], structuredContent: listed };
  }

  /** `device_call {device_id, tool, arguments}`. */
  callGeneric(args: Record<string, unknown>, ctx: CallContext & Caller): Promise<CallToolResult> {
    const deviceId = args['device_id'];
    const tool = args['tool'];
    const a = args['arguments'] ?? {};
    if (typeof deviceId !== 'string' || typeof tool !== 'string' || typeof a !== 'object' || a === null || Array.isArray(a))
      throw new GatewayError('INVALID_ARGUMENTS', 'device_call needs {"device_id": string, "tool": string, "arguments": object}');
    // Any MAC spelling names the device; anything else is looked up as given (and not found).
    return this.call(normalizeDeviceId(deviceId) ?? deviceId, tool, a as Record<string, unknown>, ctx);
  }

  /** A device's tool as its catalog has it now; undefined when the device or its catalog is not there, or the caller may not see it. */
  findTool(deviceId: string, tool: string, caller: Caller) {
    return this.d.sees(caller, deviceId) ? this.d.registry.find(deviceId)?.findTool(tool) : undefined;
  }

  async call(deviceId: string, tool: string, args: Record<string, unknown>, ctx: CallContext & Caller): Promise<CallToolResult> {
    // Another tenant's device answers as a device that never connected.
    if (!this.d.sees(ctx, deviceId)) throw new GatewayError('DEVICE_NOT_FOUND', `no device ${deviceId} has ever connected`);
    const session = this.d.registry.device(deviceId);
    if (session.findTool(tool)?.userOnly) throw new GatewayError('TOOL_NOT_FOUND', `"${tool}" on device ${deviceId} is for people only, not for an LLM`);
    const out = await session.call(tool, args, { timeoutMs: ctx.timeoutMs ?? this.d.deviceCallTimeoutMs });
    const { durationMs: _d, ...result } = out;
    return result as CallToolResult;
  }
}
