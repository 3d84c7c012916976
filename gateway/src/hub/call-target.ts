import { normalizeDeviceId } from '@voxgate/protocol';
import type { DeviceTools } from './device-tools.js';
import { deviceToolRaw, shownServerName, type ToolTarget } from './names.js';
import { GENERIC_TOOLS, type ToolNamespace } from './namespace.js';
import type { Caller, HubTool } from './types.js';
import type { Upstream } from './upstream/base.js';

/** What `callTarget` reads: the namespace, the hosted servers' tool lists, the devices' catalogs. */
export interface CallTargetSources {
  upstreams: ReadonlyMap<string, Upstream>;
  namespace: Pick<ToolNamespace, 'resolve' | 'nameOf'>;
  devices: Pick<DeviceTools, 'findTool'>;
}

/**
 * Which tool a call reaches, looked up without running it (`McpHub.callTarget`): what a person's confirmation is
 * asked about. A module of its own because it takes no part in running the call, only reads what the call would reach.
 *
 * The tool a call of `name` with `args` reaches, as it stands now: the hosted server's tool, the device's catalog
 * entry, or for `device_call` the device tool its arguments name (its own annotations, its per-device name when it
 * has one). Undefined: nothing to reach (no such tool or device, the device's catalog not loaded, a user-only tool).
 */
export function callTarget(s: CallTargetSources, name: string, args: Record<string, unknown>, caller: Caller): HubTool | undefined {
  let target: ToolTarget;
  try {
    target = s.namespace.resolve(name, caller);
  } catch {
    return undefined;
  }
  if (target.kind === 'server') {
    const t = s.upstreams.get(target.server)?.tools.find((x) => x.name === target.tool);
    if (!t) return undefined;
    const source = { ...target, server: shownServerName(target.server) };
    const entry: HubTool = { name, description: t.description ?? '', inputSchema: t.inputSchema as Record<string, unknown>, source };
    if (t.annotations) entry.annotations = t.annotations as Record<string, unknown>;
    return entry;
  }
  if (target.kind === 'generic' && target.tool === 'devices_list') return { name, ...GENERIC_TOOLS.devices_list, source: { kind: 'generic' } };
  let deviceId: string;
  let tool: string;
  if (target.kind === 'device') ({ deviceId, tool } = target);
  else {
    const id = args['device_id'];
    const t = args['tool'];
    if (typeof id !== 'string' || typeof t !== 'string') return undefined;
    deviceId = normalizeDeviceId(id) ?? id;
    tool = t;
  }
  const found = s.devices.findTool(deviceId, tool, caller);
  if (!found || found.userOnly) return undefined;
  const source = { kind: 'device' as const, deviceId, tool };
  const entry: HubTool = {
    name: s.namespace.nameOf(source) ?? deviceToolRaw(deviceId, tool),
    description: found.description,
    inputSchema: found.inputSchema,
    source,
  };
  if (found.annotations) entry.annotations = found.annotations;
  return entry;
}
