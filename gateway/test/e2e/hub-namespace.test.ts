import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { describe, expect, it } from 'vitest';
import { startTestGateway } from '../../../test/support/gateway-harness.js';
import { FIXTURE_SERVER, nodeServer } from '../../../test/support/hub.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

interface CallBody {
  content: Array<{ type: string; text?: string }>;
  isError: boolean;
}

describe('device tools in the namespace', () => {
  it('names device tools device__{id}__{tool}, resolves hashed names back, and hides user-only tools', async () => {
    const t = await startTestGateway({ mcp: { deviceTools: 'per_device' } });
    const d = new ReferenceDevice({
      deviceId: '02:00:00:00:02:01',
      tools: [
        { name: 'lamp.on', description: 'dot', run: () => 'dot' },
        { name: 'lamp_on', description: 'underscore', run: () => 'underscore' },
        { name: 'self.reboot', description: 'reboot', userOnly: true, run: () => true },
      ],
    });
    try {
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(t.wsUrl);
      await ready;
      const r = await t.api<{ tools: Array<{ name: string; source: { tool: string } }> }>('GET', '/v1/tools');
      const names = r.body.tools.map((x) => x.name);
      expect(names).not.toContain('devices_list');
      expect(names.some((n) => n.includes('reboot'))).toBe(false);
      expect(names).toContain('device__020000000201__lamp_on');
      const hashed = r.body.tools.find((x) => x.source.tool === 'lamp.on')!.name;
      expect(hashed).toMatch(/^device__020000000201__lamp_on_[a-z0-9]{6}$/);
      const a = await t.api<CallBody>('POST', `/v1/tools/${hashed}/call`, {});
      expect(a.body.content[0]!.text).toBe('dot');
      const b = await t.api<CallBody>('POST', '/v1/tools/device__020000000201__lamp_on/call', {});
      expect(b.body.content[0]!.text).toBe('underscore');
      // offline: the device's tools leave the namespace
      const offline = t.nextEvent('device.offline', d.deviceId);
      d.terminate();
      await offline;
      const gone = await t.api<{ code: string }>('POST', '/v1/tools/device__020000000201__lamp_on/call', {});
      expect(gone.body.code).toBe('TOOL_NOT_FOUND');
    } finally {
      d.terminate();
      await t.close();
    }
  });

  it('offers only devices_list and device_call in generic mode', async () => {
    const t = await startTestGateway({ mcp: { deviceTools: 'generic' } });
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:02:02' });
    try {
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(t.wsUrl);
      await ready;
      const r = await t.api<{ tools: Array<{ name: string }> }>('GET', '/v1/tools');
      expect(r.body.tools.map((x) => x.name)).toEqual(['devices_list', 'device_call']);
      const call = await t.api<CallBody>('POST', '/v1/tools/device_call/call', {
        arguments: { device_id: '020000000202', tool: 'self.audio_speaker.set_volume', arguments: { volume: 12 } },
      });
      expect(call.body.isError).toBe(false);
      expect(d.volume).toBe(12);
      const userOnly = await t.api<{ code: string }>('POST', '/v1/tools/device_call/call', { arguments: { device_id: d.deviceId, tool: 'self.reboot' } });
      expect(userOnly.body.code).toBe('TOOL_NOT_FOUND');
    } finally {
      d.terminate();
      await t.close();
    }
  });
});

describe('devices_list on a large fleet', () => {
  it('names at most mcp.devicesListMax devices and says the list is truncated', async () => {
    const t = await startTestGateway({ mcp: { deviceTools: 'generic', devicesListMax: 2 } });
    const devices = ['02:00:00:00:02:11', '02:00:00:00:02:12', '02:00:00:00:02:13'].map((id) => new ReferenceDevice({ deviceId: id }));
    try {
      for (const d of devices) {
        const ready = t.nextEvent('device.ready', d.deviceId);
        await d.connectWebSocket(t.wsUrl);
        await ready;
      }
      const r = await t.api<CallBody & { structuredContent: { devices: Array<{ device_id: string }>; truncated?: boolean } }>(
        'POST',
        '/v1/tools/devices_list/call',
        { arguments: {} },
      );
      expect(r.body.isError).toBe(false);
      expect(r.body.structuredContent.devices.map((d) => d.device_id)).toEqual(['02:00:00:00:02:11', '02:00:00:00:02:12']);
      expect(r.body.structuredContent.truncated).toBe(true);
    } finally {
      for (const d of devices) d.terminate();
      await t.close();
    }
  });
});

describe('tenants', () => {
  it('shows each caller only its tenant’s servers, over HTTP and /mcp', async () => {
    const keys = ['key-acme-0123456789', 'key-globex-0123456789', 'key-none-0123456789'];
    const t = await startTestGateway({
      apiKeys: keys,
      apiKeyTenants: { [keys[0]!]: 'acme', [keys[1]!]: 'globex' },
      mcp: {
        servers: { acmeonly: nodeServer(FIXTURE_SERVER, { tenants: ['acme'], allowed_tools: ['echo'] }), shared: { type: 'builtin', tools: ['calculator'] } },
      },
    });
    try {
      await t.gw.hubStarted;
      const list = async (key: string) =>
        (await t.api<{ tools: Array<{ name: string }> }>('GET', '/v1/tools', undefined, { apiKey: key })).body.tools
          .map((x) => x.name)
          .filter((n) => n.startsWith('mcp__'));
      expect(await list(keys[0]!)).toEqual(['mcp__acmeonly__echo', 'mcp__shared__calculator']);
      expect(await list(keys[1]!)).toEqual(['mcp__shared__calculator']);
      expect(await list(keys[2]!)).toEqual(['mcp__shared__calculator']);
      const servers = await t.api<{ servers: Array<{ name: string }> }>('GET', '/v1/mcp/servers', undefined, { apiKey: keys[1]! });
      expect(servers.body.servers.map((s) => s.name)).toEqual(['shared']);
      const denied = await t.api<{ code: string }>('POST', '/v1/tools/mcp__acmeonly__echo/call', { arguments: { text: 'x' } }, { apiKey: keys[1]! });
      expect(denied.body.code).toBe('TOOL_NOT_FOUND');
      const allowed = await t.api<CallBody>('POST', '/v1/tools/mcp__acmeonly__echo/call', { arguments: { text: 'hi acme' } }, { apiKey: keys[0]! });
      expect(allowed.body.content[0]!.text).toBe('hi acme');

      for (const [key, expected] of [
        [keys[0]!, true],
        [keys[1]!, false],
      ] as const) {
        const client = new Client({ name: 'tenant-host', version: '1' });
        await client.connect(new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
        const names = (await client.listTools()).tools.map((x) => x.name);
        expect(names.includes('mcp__acmeonly__echo')).toBe(expected);
        await client.close();
      }
    } finally {
      await t.close();
    }
  });
});
