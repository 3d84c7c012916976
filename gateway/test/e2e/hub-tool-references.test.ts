import { describe, expect, it } from 'vitest';
import { rewriteToolReferences } from '../../src/hub/tool-references.js';
import { startTestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

const names: Record<string, string> = {
  'self.get_device_status': 'device__020000000950__self_get_device_status',
  status_now: 'device__x__status_now',
  status: 'device__x__status',
};
const rename = (tool: string) => names[tool];

describe('rewriteToolReferences', () => {
  it("replaces the device's own tool names, in backticks, before punctuation and at the end of a sentence", () => {
    expect(rewriteToolReferences('If unknown, call `self.get_device_status` first, then this tool.', rename)).toBe(
      'If unknown, call `device__020000000950__self_get_device_status` first, then this tool.',
    );
    expect(rewriteToolReferences('Read it with self.get_device_status.', rename)).toBe('Read it with device__020000000950__self_get_device_status.');
    expect(rewriteToolReferences('(self.get_device_status, status_now)', rename)).toBe('(device__020000000950__self_get_device_status, device__x__status_now)');
  });

  it('leaves unknown names, partial matches and ordinary words alone', () => {
    expect(rewriteToolReferences('call self.get_device_status_v2 or self.other', rename)).toBe('call self.get_device_status_v2 or self.other');
    expect(rewriteToolReferences('the status of the device', rename)).toBe('the status of the device');
    expect(rewriteToolReferences('', rename)).toBe('');
  });
});

describe('device tool descriptions in the namespace', () => {
  it('name the namespaced tools that /mcp and /v1/tools callers can call', async () => {
    const t = await startTestGateway();
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:09:50' });
    try {
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(t.wsUrl);
      await ready;
      const r = await t.api<{ tools: Array<{ name: string; description: string }> }>('GET', '/v1/tools');
      const status = r.body.tools.find((x) => x.name.endsWith('self_get_device_status'));
      const volume = r.body.tools.find((x) => x.name.endsWith('self_audio_speaker_set_volume'));
      expect(status && volume).toBeTruthy();
      expect(volume!.description).toContain(`\`${status!.name}\``);
      expect(volume!.description).not.toContain('`self.get_device_status`');
    } finally {
      d.terminate();
      await t.close();
    }
  });
});
