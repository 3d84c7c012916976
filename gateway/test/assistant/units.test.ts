import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ConversationStore } from '../../src/assistant/conversations.js';
import { autoContextArgument, buildToolset, needsConfirmation } from '../../src/assistant/toolset.js';
import type { HubTool } from '../../src/hub/hub.js';

const dev = (deviceId: string, tool: string, name: string): HubTool => ({
  name,
  description: `[device ${deviceId}] ${tool}`,
  inputSchema: { type: 'object' },
  source: { kind: 'device', deviceId, tool },
});
const srv = (server: string, tool: string, extra: Partial<HubTool> = {}): HubTool => ({
  name: `mcp__${server}__${tool}`,
  description: tool,
  inputSchema: { type: 'object' },
  source: { kind: 'server', server, tool },
  ...extra,
});
const A = 'aa:bb:cc:dd:ee:01';
const all: HubTool[] = [
  srv('weather', 'get_forecast'),
  dev(A, 'self.light.on', 'device__aabbccddee01__self_light_on'),
  dev(A, 'self_light_on', 'device__aabbccddee01__self_light_on_x1y2z3'),
  dev('aa:bb:cc:dd:ee:02', 'self.light.on', 'device__aabbccddee02__self_light_on'),
  { name: 'devices_list', description: 'd', inputSchema: { type: 'object' }, source: { kind: 'generic' } },
];

describe('which tools a turn offers', () => {
  it('all, devices, none', () => {
    expect(buildToolset(all, 'all').specs.map((s) => s.name)).toEqual(all.map((t) => t.name));
    expect(buildToolset(all, 'devices').specs.map((s) => s.name)).not.toContain('mcp__weather__get_forecast');
    expect(buildToolset(all, 'devices').specs).toHaveLength(4);
    expect(buildToolset(all, 'none').specs).toEqual([]);
  });

  it('a bound device: its tools first under short names (distinct, mapped back), then the rest', () => {
    const ts = buildToolset(all, 'all', A);
    const names = ts.specs.map((s) => s.name);
    expect(names.slice(0, 2)).toEqual(['self_light_on', 'self_light_on_2']);
    expect(names).toContain('device__aabbccddee02__self_light_on');
    expect(names).not.toContain('device__aabbccddee01__self_light_on');
    expect(ts.byName.get('self_light_on')!.name).toBe('device__aabbccddee01__self_light_on');
    expect(ts.byName.get('self_light_on_2')!.name).toBe('device__aabbccddee01__self_light_on_x1y2z3');
    expect(ts.specs[0]!.description).toBe('self.light.on');
  });

  it('confirmation: destructiveHint, or listed by any of its names', () => {
    expect(needsConfirmation('x', srv('s', 'wipe', { annotations: { destructiveHint: true } }), [])).toBe(true);
    expect(needsConfirmation('x', srv('s', 'note'), ['note'])).toBe(true);
    expect(needsConfirmation('x', srv('s', 'note'), ['mcp__s__note'])).toBe(true);
    expect(needsConfirmation('short', dev(A, 'self.reboot', 'device__aabbccddee01__self_reboot'), ['short'])).toBe(true);
    expect(needsConfirmation('x', srv('s', 'note', { annotations: { destructiveHint: false } }), [])).toBe(false);
    const generic: HubTool = { name: 'device_call', description: 'd', inputSchema: {}, source: { kind: 'generic' } };
    expect(needsConfirmation('device_call', generic, ['self.reboot'], { device_id: A, tool: 'self.reboot' })).toBe(true);
    expect(needsConfirmation('device_call', generic, ['self.reboot'], { device_id: A, tool: 'self.light.on' })).toBe(false);
  });

  it('auto-context: the single required string, else query / q / text, else nothing', () => {
    expect(autoContextArgument({ properties: { location: { type: 'string' } }, required: ['location'] })).toBe('location');
    expect(autoContextArgument({ properties: { q: { type: 'string' }, limit: { type: 'integer' } } })).toBe('q');
    expect(autoContextArgument({ properties: { text: { type: ['string', 'null'] } } })).toBe('text');
    expect(autoContextArgument({ properties: { n: { type: 'integer' } }, required: ['n'] })).toBeUndefined();
    expect(autoContextArgument({ properties: { a: { type: 'string' }, b: { type: 'string' } }, required: ['a', 'b'] })).toBeUndefined();
    expect(autoContextArgument({})).toBeUndefined();
  });
});

describe('conversations in memory', () => {
  const limits = { ttlMs: 1000, maxConversations: 2, maxTurns: 2, maxBytes: 1000, maxTotalBytes: 1_000_000 };

  it('belong to their tenant and expire after the TTL', () => {
    const s = new ConversationStore(limits);
    const c = s.create('acme', 0);
    expect(s.get(c.id, 'acme', 500)).toBe(c);
    expect(s.get(c.id, 'globex', 500)).toBeUndefined();
    expect(s.get(c.id, undefined, 500)).toBeUndefined();
    expect(s.delete(c.id, 'globex')).toBe(false);
    expect(s.get(c.id, 'acme', 2000)).toBeUndefined();
  });

  it('keep the last turns within the byte bound, and at most maxConversations (least recently used goes)', () => {
    const s = new ConversationStore(limits);
    const c = s.create(undefined, 0);
    for (let i = 0; i < 4; i++) s.append(c, `q${i}`, `a${i}`, i);
    expect(c.messages.map((m) => m.content)).toEqual(['q2', 'a2', 'q3', 'a3']);
    s.append(c, 'x'.repeat(697), 'y'.repeat(300), 5);
    expect(c.messages.map((m) => m.content.slice(0, 2))).toEqual(['xx', 'yy']);
    expect(c.bytes).toBe(997);
    const d = s.create(undefined, 6);
    s.touch(c, 7);
    s.create(undefined, 8);
    expect(s.get(d.id, undefined, 8)).toBeUndefined();
    expect(s.get(c.id, undefined, 8)).toBe(c);
    expect(s.size).toBe(2);
  });
});

describe('the example configuration', () => {
  it('loads', () => {
    const c = loadConfig({ GATEWAY_CONFIG: fileURLToPath(new URL('../../../examples/assistant/gateway.config.json', import.meta.url)) });
    expect(Object.keys(c.assistant.models)).toEqual(['local', 'gpt', 'claude', 'gemini']);
    expect(c.assistant.defaultModel).toBe('local');
  });

  it('refuses a defaultModel or visionModel that names no model', () => {
    const file = fileURLToPath(new URL('../../../examples/assistant/gateway.config.json', import.meta.url));
    expect(() => loadConfig({ GATEWAY_CONFIG: file, GATEWAY_ASSISTANT_DEFAULT_MODEL: 'nope' })).toThrow(/assistant\.defaultModel: names no model/);
    expect(() => loadConfig({ GATEWAY_CONFIG: file }, { assistant: { visionModel: 'nope' } })).toThrow(/assistant\.visionModel: names no model/);
  });
});
