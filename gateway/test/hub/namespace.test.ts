import { describe, expect, it } from 'vitest';
import { ToolCatalog } from '../../src/devices/catalog.js';
import { ToolNamespace } from '../../src/hub/namespace.js';
import type { DeviceToolMode, HubDevices, ListedDevice } from '../../src/hub/types.js';

const tool = (name: string, description: string, extra: Record<string, unknown> = {}) => ({
  name,
  description,
  inputSchema: { type: 'object' as const, properties: {} },
  ...extra,
});

/** The hub's view of the registry: the ready devices a test puts in `ready`. */
function devicesPort(ready: ListedDevice[], describe?: HubDevices['describe']): HubDevices {
  return {
    ready: () => ready,
    onChange: () => () => undefined,
    page: () => ({ devices: [], next: undefined }),
    get: () => undefined,
    device: () => {
      throw new Error('not in this test');
    },
    find: () => undefined,
    ...(describe ? { describe } : {}),
  };
}

const lamp = {
  deviceId: '02:00:00:00:02:01',
  state: 'ready',
  catalog: ToolCatalog.from([tool('lamp.on', 'dot'), tool('lamp_on', 'underscore'), tool('self.reboot', 'reboot', { annotations: { audience: ['user'] } })]),
};

const namespace = (ready: ListedDevice[], mode: DeviceToolMode, describe?: HubDevices['describe']) =>
  new ToolNamespace(new Map(), devicesPort(ready, describe), mode);

describe('ToolNamespace: device tools', () => {
  it('names device tools device__{id}__{tool}, resolves hashed names back, and hides user-only tools', () => {
    const ns = namespace([lamp], 'per_device');
    const tools = ns.tools({});
    const names = tools.map((x) => x.name);
    expect(names).not.toContain('devices_list');
    expect(names.some((n) => n.includes('reboot'))).toBe(false);
    expect(names).toContain('device__020000000201__lamp_on');
    const hashed = tools.find((x) => x.source.kind === 'device' && x.source.tool === 'lamp.on')!.name;
    expect(hashed).toMatch(/^device__020000000201__lamp_on_[a-z0-9]{6}$/);
    expect(ns.resolve(hashed, {})).toEqual({ kind: 'device', deviceId: lamp.deviceId, tool: 'lamp.on' });
    expect(ns.resolve('device__020000000201__lamp_on', {})).toEqual({ kind: 'device', deviceId: lamp.deviceId, tool: 'lamp_on' });
    expect(() => ns.resolve('device__020000000201__self_reboot', {})).toThrow(expect.objectContaining({ code: 'TOOL_NOT_FOUND' }));
  });

  it("drops a device's tools once it is gone and the namespace is invalidated", () => {
    const ready = [lamp];
    const ns = namespace(ready, 'per_device');
    expect(ns.resolve('device__020000000201__lamp_on', {})).toMatchObject({ kind: 'device' });
    ready.pop();
    ns.invalidate();
    expect(() => ns.resolve('device__020000000201__lamp_on', {})).toThrow(expect.objectContaining({ code: 'TOOL_NOT_FOUND' }));
  });

  it('lists a device only once it is ready with a catalog', () => {
    const ns = namespace(
      [
        { ...lamp, state: 'initializing' },
        { deviceId: '02:00:00:00:02:09', state: 'ready' },
      ],
      'per_device',
    );
    expect(ns.tools({})).toEqual([]);
  });

  it('offers only devices_list and device_call in generic mode, and both kinds in both', () => {
    expect(
      namespace([lamp], 'generic')
        .tools({})
        .map((x) => x.name),
    ).toEqual(['devices_list', 'device_call']);
    const both = namespace([lamp], 'both')
      .tools({})
      .map((x) => x.name);
    expect(both.slice(-2)).toEqual(['devices_list', 'device_call']);
    expect(both).toContain('device__020000000201__lamp_on');
  });

  it("names the namespaced tools in a device tool's description, and labels it with what people call the device", () => {
    const board = {
      deviceId: '02:00:00:00:09:50',
      state: 'ready',
      catalog: ToolCatalog.from([
        tool('self.get_device_status', 'Reads the status.'),
        tool(
          'self.audio_speaker.set_volume',
          'Sets the speaker volume. If the current volume is not known, call `self.get_device_status` first, then this tool.',
        ),
      ]),
    };
    const tools = namespace([board], 'per_device', () => ({ name: 'Speaker', room: 'Kitchen', tags: [] })).tools({});
    const status = tools.find((x) => x.name.endsWith('self_get_device_status'));
    const volume = tools.find((x) => x.name.endsWith('self_audio_speaker_set_volume'));
    expect(status && volume).toBeTruthy();
    expect(volume!.description).toContain(`\`${status!.name}\``);
    expect(volume!.description).not.toContain('`self.get_device_status`');
    expect(volume!.description.startsWith('[device 02:00:00:00:09:50 "Speaker" in Kitchen] ')).toBe(true);
  });

  it('hides the tools of a device the caller may not see, and refuses to resolve them', () => {
    const ns = new ToolNamespace(new Map(), devicesPort([lamp]), 'per_device', (caller) => caller.tenant === undefined);
    expect(ns.tools({ tenant: 'acme' })).toEqual([]);
    expect(ns.tools({}).length).toBe(2);
    expect(() => ns.resolve('device__020000000201__lamp_on', { tenant: 'acme' })).toThrow(expect.objectContaining({ code: 'TOOL_NOT_FOUND' }));
  });

  it('refuses a name that is not a tool name, without echoing more than 80 characters', () => {
    const ns = namespace([lamp], 'per_device');
    expect(() => ns.resolve('bad name!', {})).toThrow(expect.objectContaining({ code: 'TOOL_NOT_FOUND', message: '"bad name!" is not a tool name' }));
    let message = '';
    try {
      ns.resolve('!'.repeat(500), {});
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toBe(`"${'!'.repeat(80)}" is not a tool name`);
  });

  it("builds each tenant's list once per version, and rebuilds it after a change: device gone, catalog or name changed", () => {
    const ready: ListedDevice[] = [lamp];
    let rebuilt = 0;
    let room = 'Kitchen';
    const describe = () => (rebuilt++, { name: 'Lamp', room, tags: [] });
    const ns = namespace(ready, 'per_device', describe);
    const first = ns.tools({});
    const again = ns.tools({ tenant: undefined, principal: 'other-key' });
    expect(again).toEqual(first);
    // One build (two device tools labelled) served both callers of the same tenant.
    expect(rebuilt).toBe(2);
    // A copy of the list each time: a caller's array is its own; the entries are shared and frozen.
    again.pop();
    expect(ns.tools({})).toHaveLength(2);
    expect(Object.isFrozen(first[0])).toBe(true);
    // Another tenant has its own entry.
    ns.tools({ tenant: 'acme' });
    expect(rebuilt).toBe(4);
    // The device's name changed (the hub invalidates on the directory's change): the label follows.
    room = 'Hall';
    expect(ns.tools({})[0]!.description).toContain('in Kitchen');
    ns.invalidate();
    expect(ns.tools({})[0]!.description).toContain('in Hall');
    // A catalog change: the new tool is listed after invalidation.
    ready[0] = { ...lamp, catalog: ToolCatalog.from([tool('lamp.dim', 'dim')]) };
    ns.invalidate();
    expect(ns.tools({}).map((t) => t.name)).toEqual(['device__020000000201__lamp_dim']);
    // The device went away.
    ready.pop();
    ns.invalidate();
    expect(ns.tools({})).toEqual([]);
  });

  it("rebuilds the list when a server's state changes (its tools are listed only while it is ready)", () => {
    const server = {
      state: 'ready' as string,
      config: { name: 'wx', tenants: undefined, autoContextTools: [] as string[] },
      get tools() {
        return this.state === 'ready' ? this.knownTools : [];
      },
      knownTools: [tool('forecast', 'Forecast')],
    };
    const ns = new ToolNamespace(new Map([['wx', server as never]]), devicesPort([]), 'per_device');
    expect(ns.tools({}).map((t) => t.name)).toEqual(['mcp__wx__forecast']);
    server.state = 'failed';
    expect(ns.tools({})).toEqual([]);
    server.state = 'ready';
    expect(ns.tools({}).map((t) => t.name)).toEqual(['mcp__wx__forecast']);
  });
});
