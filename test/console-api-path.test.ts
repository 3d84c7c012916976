import { describe, expect, it } from 'vitest';
import { hasDotSegment } from '../console/src/lib/api-path.js';

/** The console's API paths (console/src/lib/api.ts refuses these): an id taken from the page's hash must not turn into another route. */
describe('console api paths: dot segments', () => {
  const devicePath = (id: string) => `/v1/devices/${encodeURIComponent(id)}`;

  it('finds a "." or ".." segment, plain or percent-encoded, as the device view builds them from #/devices/.. or #/devices/.', () => {
    for (const path of [
      devicePath('..'),
      devicePath('.'),
      `${devicePath('..')}/tools/x/call`,
      '/v1/devices/%2e%2E',
      '/v1/devices/.%2e/tools',
      '/v1/./devices',
      'http://127.0.0.1:1/v1/devices/..?x=1',
    ])
      expect(hasDotSegment(path), path).toBe(true);
  });

  it('lets ids with dots inside, and dots in the query, through', () => {
    for (const path of [
      devicePath('aa:bb:cc:dd:ee:ff'),
      devicePath('a..b'),
      devicePath('...'),
      `${devicePath('x')}?q=..`,
      '/v1/devices/x#/..',
      devicePath('%2e%2e'),
    ])
      expect(hasDotSegment(path), path).toBe(false);
  });
});
