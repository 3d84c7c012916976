import { describe, expect, it } from 'vitest';
import { rewriteToolReferences } from '../../src/hub/tool-references.js';

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

  it('keeps several trailing dots out of the name, and treats regex characters in the text as text', () => {
    expect(rewriteToolReferences('try self.get_device_status...', rename)).toBe('try device__020000000950__self_get_device_status...');
    expect(rewriteToolReferences('a (.*) [self.get_device_status]+', rename)).toBe('a (.*) [device__020000000950__self_get_device_status]+');
  });
});
