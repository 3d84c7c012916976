import { describe, expect, it } from 'vitest';
import { toolLines } from '../../src/cli/chat.js';

const LAMP = '02:00:00:00:24:01';
const OTHER = '02:00:00:00:24:02';
const tools = [
  {
    name: 'device__020000002401__self_light_set',
    description: `[device ${LAMP}] Set the light`,
    source: { kind: 'device', deviceId: LAMP, tool: 'self.light.set' },
  },
  { name: 'device__020000002402__self_reboot', description: `[device ${OTHER}] Reboot`, source: { kind: 'device', deviceId: OTHER, tool: 'self.reboot' } },
  { name: 'mcp__fx__note', description: 'Keep a note\nmore', source: { kind: 'server', server: 'fx', tool: 'note' } },
  { name: 'device_call', description: 'Calls a tool on one device.', source: { kind: 'generic' } },
];

describe('voxgate chat /tools', () => {
  it('unbound: every tool, one line each', () => {
    expect(toolLines(tools, undefined)).toEqual([
      `device__020000002401__self_light_set  [device ${LAMP}] Set the light`,
      `device__020000002402__self_reboot  [device ${OTHER}] Reboot`,
      'mcp__fx__note  Keep a note',
      'device_call  Calls a tool on one device.',
    ]);
    expect(toolLines([], undefined)).toEqual(['(no tools)']);
  });

  it("bound to a device (any spelling of its id): its tools by their own names, not other devices'", () => {
    expect(toolLines(tools, LAMP.toUpperCase())).toEqual([
      `device ${LAMP}:`,
      '  self.light.set  Set the light',
      'mcp__fx__note  Keep a note',
      'device_call  Calls a tool on one device.',
      '(1 tool of other devices not shown: /tools all)',
    ]);
    expect(toolLines(tools, '02:00:00:00:99:99')[0]).toBe('device 02:00:00:00:99:99: no tools (offline, or not known here)');
    // Generic device tools only (mcp.deviceTools: generic): nothing to say about the device itself.
    expect(toolLines(tools.slice(2), LAMP)).toEqual(['mcp__fx__note  Keep a note', 'device_call  Calls a tool on one device.']);
  });
});
