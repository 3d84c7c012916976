import { GatewayError } from '../errors.js';
import { mayUseServer } from '../principal.js';
import { buildNamespace, deviceToolRaw, serverToolRaw, shownServerName, TOOL_NAME, type ToolTarget } from './names.js';
import { rewriteToolReferences } from './tool-references.js';
import type { Caller, DeviceToolMode, DeviceVisibility, HubDevices, HubTool, ListedDevice } from './types.js';
import type { Upstream } from './upstream/base.js';

export const GENERIC_TOOLS: Record<'devices_list' | 'device_call', Omit<HubTool, 'name' | 'source'>> = {
  devices_list: {
    description:
      'Lists the voice devices connected to the gateway, with the name, room and tags people gave each one and the tools it offers. ' +
      'Call it before device_call; find "the living-room speaker" by its room or name.',
    inputSchema: {
      type: 'object',
      properties: {
        online_only: { type: 'boolean', description: 'Only devices online now (default true)' },
        room: { type: 'string', maxLength: 64, description: 'Only devices in this room (ignoring case)' },
      },
      additionalProperties: false,
    },
    annotations: { readOnlyHint: true },
  },
  device_call: {
    description: 'Calls a tool on one device. Get device ids and tool names from devices_list.',
    inputSchema: {
      type: 'object',
      properties: {
        device_id: { type: 'string', maxLength: 64, description: 'Device id (MAC address) from devices_list' },
        tool: { type: 'string', maxLength: 256, description: "The device's tool name, e.g. self.audio_speaker.set_volume" },
        arguments: { type: 'object', description: "The tool's arguments", additionalProperties: true },
      },
      required: ['device_id', 'tool'],
      additionalProperties: false,
    },
  },
};

/**
 * How a device tool's description names its device: the id, and what people call it, so "turn the
 * living-room speaker down" finds it. Brackets and quotes are left out of people's words (the assistant
 * strips the `[device …] ` prefix for a bound device, assistant/toolset.ts).
 */
export function deviceLabel(deviceId: string, meta: { name: string | null; room: string | null; tags: readonly string[] } | undefined): string {
  const clean = (v: string) => v.replace(/[[\]"]/g, '');
  const parts = [`device ${deviceId}`];
  if (meta?.name) parts.push(`"${clean(meta.name)}"`);
  if (meta?.room) parts.push(`in ${clean(meta.room)}`);
  if (meta?.tags.length) parts.push(`tags ${meta.tags.join(',')}`);
  return parts.join(' ');
}

/** Tenants whose tool lists are kept at once (beyond it the cache starts over). */
const MAX_CACHED_TENANTS = 1024;

export function targetKey(t: ToolTarget): string {
  return t.kind === 'server' ? `s\0${t.server}\0${t.tool}` : t.kind === 'device' ? `d\0${t.deviceId}\0${t.tool}` : `g\0${t.tool}`;
}

/** Whether a caller may see a server: servers limited to tenants are hidden from every other caller. */
export function visibleTo(u: Upstream, caller: Caller): boolean {
  return mayUseServer(caller, u.config.tenants);
}

/**
 * The one namespace of tools: every server's tools, every ready device's tools, the generic device tools.
 * Rebuilt lazily after a change (a device came, went or changed its tools; a server's tools changed).
 */
export class ToolNamespace {
  private version = 0;
  /**
   * `map`: a name to its target; `others`: the further targets of a name two tenants' servers share (each tenant
   * sees one of them; kept apart so that the fleet's device tools cost no array each).
   */
  private ns: { version: number; map: Map<string, ToolTarget>; others: Map<string, ToolTarget[]>; byTarget: Map<string, string> } | undefined;
  /**
   * Each tenant's list, built once per namespace version (and servers' states, which gate `u.tools`): an assistant turn
   * lists the tools, and 100 turns starting together must not rebuild (and rewrite every description) 100 times.
   */
  private listed: { version: number; states: string; byTenant: Map<string, readonly HubTool[]> } | undefined;

  constructor(
    private readonly upstreams: ReadonlyMap<string, Upstream>,
    private readonly devices: HubDevices,
    private readonly mode: DeviceToolMode,
    /** A caller's view of the devices: other tenants' device tools are neither listed nor resolved. */
    private readonly sees: DeviceVisibility = () => true,
  ) {}

  /** Something in the namespace changed: the next read rebuilds it. */
  invalidate(): void {
    this.version++;
  }

  private current() {
    if (this.ns?.version === this.version) return this.ns;
    const entries: Array<{ raw: string; target: ToolTarget }> = [];
    // A tenant's own servers (keys `<tenant>/<name>`) are named apart, per tenant: what one tenant hosts never
    // renames another's tools (names.ts serverKey). Everything else is one group, named as before.
    const owned = new Map<string, Array<{ raw: string; target: ToolTarget }>>();
    for (const u of this.upstreams.values()) {
      const key = u.config.name;
      const shown = shownServerName(key);
      const owner = shown === key ? undefined : key.slice(0, key.length - shown.length - 1);
      const group = owner === undefined ? entries : (owned.get(owner) ?? []);
      if (owner !== undefined) owned.set(owner, group);
      for (const t of u.knownTools) group.push({ raw: serverToolRaw(shown, t.name), target: { kind: 'server', server: key, tool: t.name } });
    }
    if (this.mode !== 'generic')
      for (const s of this.readyDevices())
        for (const t of s.catalog!.tools)
          if (!t.userOnly) entries.push({ raw: deviceToolRaw(s.deviceId, t.name), target: { kind: 'device', deviceId: s.deviceId, tool: t.name } });
    if (this.mode !== 'per_device') {
      entries.push({ raw: 'devices_list', target: { kind: 'generic', tool: 'devices_list' } });
      entries.push({ raw: 'device_call', target: { kind: 'generic', tool: 'device_call' } });
    }
    const map = buildNamespace(entries);
    const others = new Map<string, ToolTarget[]>();
    for (const group of owned.values())
      for (const [name, t] of buildNamespace(group)) {
        if (!map.has(name)) map.set(name, t);
        else others.set(name, [...(others.get(name) ?? []), t]);
      }
    const byTarget = new Map<string, string>();
    for (const [name, t] of map) byTarget.set(targetKey(t), name);
    for (const [name, ts] of others) for (const t of ts) byTarget.set(targetKey(t), name);
    this.ns = { version: this.version, map, others, byTarget };
    return this.ns;
  }

  /** Ready devices with a catalog: local sessions, plus (cluster) the ready devices of the other instances. */
  private readyDevices(): ListedDevice[] {
    return this.devices.ready().filter((s) => (s.state === undefined || s.state === 'ready') && s.catalog !== undefined);
  }

  /**
   * The provider-neutral tool list for this caller: servers' tools, device tools, generic device tools. Cached per
   * tenant until the namespace changes (`invalidate`) or a server changes state; the entries are shared and frozen.
   */
  tools(caller: Caller): HubTool[] {
    const states = [...this.upstreams.values()].map((u) => u.state).join();
    if (this.listed?.version !== this.version || this.listed.states !== states) this.listed = { version: this.version, states, byTenant: new Map() };
    // Only the tenant decides what a caller sees (servers' `tenants`, devices' owners).
    const key = caller.tenant !== undefined ? `t:${caller.tenant}` : caller.untenantedOnly === true ? 'u' : '';
    let list = this.listed.byTenant.get(key);
    if (!list) {
      list = this.build({ tenant: caller.tenant, untenantedOnly: caller.untenantedOnly }).map((t) => Object.freeze(t));
      if (this.listed.byTenant.size >= MAX_CACHED_TENANTS) this.listed.byTenant.clear();
      this.listed.byTenant.set(key, list);
    }
    return list.slice();
  }

  private build(caller: Caller): HubTool[] {
    const ns = this.current();
    const out: HubTool[] = [];
    for (const u of this.upstreams.values()) {
      if (!visibleTo(u, caller)) continue;
      for (const t of u.tools) {
        const name = ns.byTarget.get(targetKey({ kind: 'server', server: u.config.name, tool: t.name }));
        if (!name) continue;
        // Everything the server defined passes on; only the name (namespaced) is ours.
        const { name: _n, description, inputSchema, title, outputSchema, annotations, ...fields } = t;
        const entry: HubTool = {
          name,
          description: description ?? '',
          inputSchema: inputSchema as Record<string, unknown>,
          // Named as the caller knows it (a tenant's server by its name, not its key: names.ts serverKey).
          source: { kind: 'server', server: shownServerName(u.config.name), tool: t.name },
        };
        if (annotations) entry.annotations = annotations as Record<string, unknown>;
        if (typeof title === 'string') entry.title = title;
        if (outputSchema) entry.outputSchema = outputSchema as Record<string, unknown>;
        if (Object.keys(fields).length > 0) entry.fields = fields;
        if (u.config.responseInstruction) entry.responseInstruction = u.config.responseInstruction;
        if (u.config.autoContextTools.includes(t.name)) entry.autoContext = true;
        out.push(entry);
      }
    }
    if (this.mode !== 'generic')
      for (const s of this.readyDevices()) {
        if (!this.sees(caller, s.deviceId)) continue;
        for (const t of s.catalog!.tools) {
          if (t.userOnly) continue;
          const name = ns.byTarget.get(targetKey({ kind: 'device', deviceId: s.deviceId, tool: t.name }));
          if (!name) continue;
          // The firmware's own tool names inside descriptions become the names callers can call.
          const description = rewriteToolReferences(t.description, (tool) => ns.byTarget.get(targetKey({ kind: 'device', deviceId: s.deviceId, tool })));
          const label = deviceLabel(s.deviceId, this.devices.describe?.(s.deviceId));
          const entry: HubTool = {
            name,
            description: `[${label}] ${description}`,
            inputSchema: t.inputSchema,
            source: { kind: 'device', deviceId: s.deviceId, tool: t.name },
          };
          if (t.annotations) entry.annotations = t.annotations;
          out.push(entry);
        }
      }
    if (this.mode !== 'per_device') for (const [name, def] of Object.entries(GENERIC_TOOLS)) out.push({ name, ...def, source: { kind: 'generic' } });
    return out;
  }

  /** The namespaced name of a target, when it has one now. */
  nameOf(target: ToolTarget): string | undefined {
    return this.current().byTarget.get(targetKey(target));
  }

  /** Resolve a namespaced name to its target, for this caller; TOOL_NOT_FOUND otherwise. */
  resolve(name: string, caller: Caller): ToolTarget {
    if (!TOOL_NAME.test(name)) throw new GatewayError('TOOL_NOT_FOUND', `"${name.slice(0, 80)}" is not a tool name`, { tool: name.slice(0, 80) });
    const ns = this.current();
    const sees = (x: ToolTarget) =>
      x.kind === 'server' ? visibleTo(this.upstreams.get(x.server)!, caller) : x.kind !== 'device' || this.sees(caller, x.deviceId);
    const first = ns.map.get(name);
    const t = first && sees(first) ? first : ns.others.get(name)?.find(sees);
    if (!t) throw new GatewayError('TOOL_NOT_FOUND', `no tool named "${name}"; list them with GET /v1/tools or tools/list`, { tool: name });
    return t;
  }
}
