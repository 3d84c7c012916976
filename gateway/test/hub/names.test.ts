import { describe, expect, it } from 'vitest';
import { buildNamespace, cleanPart, compactDeviceId, deviceToolRaw, serverToolRaw, TOOL_NAME, type ToolTarget } from '../../src/hub/names.js';

const srv = (server: string, tool: string): { raw: string; target: ToolTarget } => ({
  raw: serverToolRaw(server, tool),
  target: { kind: 'server', server, tool },
});
const server = (s: string, tool: string) => ({ raw: serverToolRaw(s, tool), target: { kind: 'server', server: s, tool } as ToolTarget });

describe('tool names', () => {
  it('compacts a device id and builds the raw names', () => {
    expect(compactDeviceId('02:AB:00:00:00:01')).toBe('02ab00000001');
    expect(deviceToolRaw('02:00:00:00:09:50', 'self.get_device_status')).toBe('device__020000000950__self.get_device_status');
    expect(serverToolRaw('weather', 'forecast')).toBe('mcp__weather__forecast');
    expect(cleanPart('self.audio speaker/set')).toBe('self_audio_speaker_set');
  });

  it('keeps a name that is valid and unique as it stands', () => {
    const ns = buildNamespace([server('weather', 'forecast')]);
    expect([...ns.keys()]).toEqual(['mcp__weather__forecast']);
    expect(ns.get('mcp__weather__forecast')).toEqual({ kind: 'server', server: 'weather', tool: 'forecast' });
  });

  it('cleans a device name, and suffixes a cleaned name that would take an untouched one', () => {
    const ns = buildNamespace([server('s', 'a.b'), server('s', 'a_b')]);
    const names = [...ns.keys()];
    // The untouched raw name keeps its name; the cleaned one gets _ + a 6-character hash.
    expect(names[0]).toBe('mcp__s__a_b');
    expect(ns.get('mcp__s__a_b')).toMatchObject({ tool: 'a_b' });
    expect(names[1]).toMatch(/^mcp__s__a_b_[a-z0-9]{6}$/);
    expect(ns.get(names[1]!)).toMatchObject({ tool: 'a.b' });
  });
});

describe('buildNamespace', () => {
  it('keeps clean names, cleans the rest, and adds a short hash only on collision or length', () => {
    const ns = buildNamespace([srv('fs', 'read_file'), srv('fs', 'read.file'), srv('fs', 'read file'), srv('fs', 'x'.repeat(100)), srv('fs', 'x'.repeat(101))]);
    const names = [...ns.keys()];
    expect(names).toContain('mcp__fs__read_file');
    expect(ns.get('mcp__fs__read_file')).toEqual({ kind: 'server', server: 'fs', tool: 'read_file' });
    for (const n of names) expect(n).toMatch(TOOL_NAME);
    expect(new Set(names).size).toBe(5);
    const dotted = names.find((n) => (ns.get(n) as { tool: string }).tool === 'read.file')!;
    expect(dotted).toMatch(/^mcp__fs__read_file_[a-z0-9]{6}$/);
    const long = names.filter((n) => (ns.get(n) as { tool: string }).tool.startsWith('xxx'));
    for (const n of long) expect(n).toHaveLength(64);
    expect(long[0]).not.toBe(long[1]);
  });

  it('is deterministic: the same set in any order gives the same names', () => {
    const entries = [
      srv('a', 'b.c'),
      srv('a', 'b_c'),
      srv('a', 'b-c'),
      srv('a', 'b c'),
      { raw: deviceToolRaw('aa:bb:cc:dd:ee:ff', 'self.x'), target: { kind: 'device', deviceId: 'aa:bb:cc:dd:ee:ff', tool: 'self.x' } as ToolTarget },
    ];
    const one = [...buildNamespace(entries)].sort();
    const two = [...buildNamespace([...entries].reverse())].sort();
    expect(two).toEqual(one);
    expect(one.map(([n]) => n)).toContain('device__aabbccddeeff__self_x');
  });
});
