import { describe, expect, it } from 'vitest';
import { autoContextArgument, buildToolset, callNeedsConfirmation, needsConfirmation } from '../../src/assistant/toolset.js';
import type { HubTool } from '../../src/hub/hub.js';

const schema = { type: 'object', properties: {} };
const device = (id: string, tool: string, extra: Partial<HubTool> = {}): HubTool => ({
  name: `device__${id.replace(/:/g, '')}__${tool.replace(/\./g, '_')}`,
  description: `[device ${id} "Speaker"] does ${tool}`,
  inputSchema: schema,
  source: { kind: 'device', deviceId: id, tool },
  ...extra,
});
const server = (name: string, tool: string): HubTool => ({
  name: `mcp__${name}__${tool}`,
  description: tool,
  inputSchema: schema,
  source: { kind: 'server', server: name, tool },
});
const generic: HubTool = { name: 'device_call', description: 'calls', inputSchema: schema, source: { kind: 'generic' } };
const A = '02:00:00:00:00:01';
const B = '02:00:00:00:00:02';

describe('buildToolset', () => {
  const all = [server('weather', 'forecast'), device(A, 'self.audio_speaker.set_volume'), device(B, 'self.audio_speaker.set_volume'), generic];

  it('offers everything for "all", no server tools for "devices", nothing for "none"', () => {
    expect(buildToolset(all, 'all').specs.map((s) => s.name)).toEqual(all.map((t) => t.name));
    expect(buildToolset(all, 'devices').specs.map((s) => s.name)).toEqual(all.slice(1).map((t) => t.name));
    expect(buildToolset(all, 'none')).toEqual({ specs: [], byName: new Map() });
  });

  it("offers the bound device's tools first, under short names without the device label, mapped back to the hub tool", () => {
    const set = buildToolset(all, 'all', A);
    expect(set.specs[0]).toEqual({ name: 'self_audio_speaker_set_volume', description: 'does self.audio_speaker.set_volume', parameters: schema });
    expect(set.byName.get('self_audio_speaker_set_volume')?.source).toEqual({ kind: 'device', deviceId: A, tool: 'self.audio_speaker.set_volume' });
    expect(set.specs.slice(1).map((s) => s.name)).toEqual([all[0]!.name, all[2]!.name, 'device_call']);
  });

  it("sends the providers a tool's parameters without the server's root $schema", () => {
    const declared = { ...server('weather', 'forecast'), inputSchema: { $schema: 'https://json-schema.org/draft/2020-12/schema', ...schema } };
    expect(buildToolset([declared], 'all').specs[0]?.parameters).toEqual(schema);
    expect(declared.inputSchema.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
  });

  it('gives a short name that would take another tool’s name a numbered one instead', () => {
    const clash = [device(A, 'device_call'), device(A, 'a.b'), device(A, 'a_b'), generic];
    const names = buildToolset(clash, 'all', A).specs.map((s) => s.name);
    expect(names).toEqual(['device_call_2', 'a_b', 'a_b_2', 'device_call']);
    expect(new Set(names).size).toBe(names.length);
  });
});

describe('confirmation', () => {
  it('needs a yes for a destructive tool, or one listed by any of its names', () => {
    const reboot = device(A, 'self.reboot', { annotations: { destructiveHint: true } });
    const volume = device(A, 'self.audio_speaker.set_volume');
    expect(needsConfirmation('self_reboot', reboot, [])).toBe(true);
    expect(needsConfirmation('x', volume, [])).toBe(false);
    expect(needsConfirmation('x', volume, ['self.audio_speaker.set_volume'])).toBe(true);
    expect(needsConfirmation('x', volume, [volume.name])).toBe(true);
    expect(needsConfirmation('short_name', volume, ['short_name'])).toBe(true);
  });

  it('through device_call, the device tool it names counts, and so does the target the hub resolved', () => {
    expect(needsConfirmation('device_call', generic, ['self.reboot'], { tool: 'self.reboot' })).toBe(true);
    expect(needsConfirmation('device_call', generic, ['self.reboot'], { tool: 42 })).toBe(false);
    const target = device(A, 'self.reboot', { annotations: { destructiveHint: true } });
    expect(callNeedsConfirmation('device_call', generic, target, [], { tool: 'self.reboot' })).toBe(true);
    expect(callNeedsConfirmation('device_call', generic, device(A, 'self.ping'), [], { tool: 'self.ping' })).toBe(false);
  });
});

describe('autoContextArgument', () => {
  it('picks the single required string parameter, else query / q / text', () => {
    expect(autoContextArgument({ properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city'] })).toBe('city');
    expect(autoContextArgument({ properties: { q: { type: ['string', 'null'] } } })).toBe('q');
    expect(autoContextArgument({ properties: { text: { type: 'string' }, query: { type: 'string' } } })).toBe('query');
  });

  it('finds none when the one required parameter is not a string, or when several are required', () => {
    expect(autoContextArgument({ properties: { n: { type: 'integer' } }, required: ['n'] })).toBeUndefined();
    expect(autoContextArgument({ properties: { a: { type: 'string' }, query: { type: 'string' } }, required: ['a', 'query'] })).toBeUndefined();
    expect(autoContextArgument({})).toBeUndefined();
  });
});
