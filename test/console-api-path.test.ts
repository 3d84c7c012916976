import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { api, devicePath } from '../console/src/lib/api.js';

/** The console's API calls: an id taken from the page's hash must not turn into another route. */
describe('console api(): dot segments', () => {
  let server: Server | undefined;
  afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

  it('refuses a path with a "." or ".." segment (plain or percent-encoded) before any request; other ids go through', async () => {
    const seen: string[] = [];
    server = createServer((req, res) => {
      seen.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const key = 'console-test-key';
    // As the device view builds them from `#/devices/..` and `#/devices/.`; and written encoded (fetch resolves those too).
    const paths = [devicePath('..'), devicePath('.'), '/v1/devices/%2e%2E', '/v1/devices/.%2e'];
    for (const path of paths) await expect(api('POST', `${base}${path}/tools/x/call`, {}, { key })).rejects.toMatchObject({ problem: { code: 'BAD_PATH' } });
    expect(seen).toEqual([]);
    await api('GET', `${base}${devicePath('aa:bb:cc:dd:ee:ff')}`, undefined, { key });
    await api('GET', `${base}${devicePath('a..b')}?q=..`, undefined, { key });
    expect(seen).toEqual(['/v1/devices/aa%3Abb%3Acc%3Add%3Aee%3Aff', '/v1/devices/a..b?q=..']);
  });
});
