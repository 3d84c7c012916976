import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deviceRoutes } from '../../src/api/devices.js';
import { apiPart, bearer } from '../../../test/support/api-parts.js';
import { registryPart } from '../../../test/support/registry-parts.js';

interface Page {
  devices: Array<{ id: string; online: boolean }>;
  nextCursor?: string;
}

const idOf = (n: number) => `02:00:00:00:${(n >> 8).toString(16).padStart(2, '0')}:${(n & 0xff).toString(16).padStart(2, '0')}`;

/** GET /v1/devices over a real registry whose devices connect over in-memory links (no gateway, no sockets). */
describe('GET /v1/devices pagination (issue 8, defect 10b)', () => {
  const part = registryPart();
  let app: FastifyInstance;
  const ids: string[] = [];
  beforeAll(async () => {
    app = await apiPart((scope) => scope.register(deviceRoutes, { registry: part.registry }));
    // Devices that connect and stay in awaiting_hello: cheap, and listed like any other.
    // Connected in a shuffled order: the listing is ordered by id, not by arrival.
    const order = Array.from({ length: 130 }, (_, i) => (i * 47) % 130);
    for (const n of order) await part.connect(idOf(n));
    ids.push(...order.map(idOf).sort());
    // Every tenth device goes offline.
    for (const id of ids.filter((x) => Number.parseInt(x.slice(-2), 16) % 10 === 0)) await part.disconnect(id);
  });
  afterAll(async () => {
    await part.close();
    await app.close();
  });

  const get = async <T>(url: string) => {
    const res = await app.inject({ method: 'GET', url, headers: bearer() });
    return { status: res.statusCode, body: res.json<T>() };
  };

  async function walk(query: string): Promise<{ pages: Page[]; ids: string[] }> {
    const pages: Page[] = [];
    let cursor: string | undefined;
    do {
      const sep = query ? '&' : '';
      const res = await get<Page>(`/v1/devices?${query}${cursor ? `${sep}cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(res.status).toBe(200);
      pages.push(res.body);
      cursor = res.body.nextCursor;
    } while (cursor !== undefined && pages.length < 100);
    return { pages, ids: pages.flatMap((p) => p.devices.map((d) => d.id)) };
  }

  it('pages by 100 by default, in id order, every device once, with nextCursor until the last page', async () => {
    const first = await get<Page>('/v1/devices');
    expect(first.body.devices.length).toBe(100);
    expect(first.body.nextCursor).toEqual(expect.any(String));
    const all = await walk('');
    expect(all.pages.map((p) => p.devices.length)).toEqual([100, 30]);
    expect(all.pages[1]!.nextCursor).toBeUndefined();
    expect(all.ids).toEqual(ids);
  });

  it('honours limit and keeps the filters across pages', async () => {
    const small = await walk('limit=7');
    expect(small.ids).toEqual(ids);
    expect(small.pages.every((p) => p.devices.length <= 7)).toBe(true);
    const offline = await walk('online=false&limit=5');
    expect(offline.ids).toEqual(ids.filter((id) => Number.parseInt(id.slice(-2), 16) % 10 === 0));
    expect(offline.pages.flatMap((p) => p.devices).every((d) => !d.online)).toBe(true);
    const online = await walk('online=true&limit=50&transport=websocket');
    expect(online.ids.length).toBe(ids.length - offline.ids.length);
    expect((await walk('transport=mqtt')).ids).toEqual([]);
  });

  it('refuses a bad limit or a cursor it did not give out', async () => {
    for (const q of ['limit=0', 'limit=1001', 'limit=ten', 'cursor=not*base64', `cursor=${Buffer.from('x1:02:00:00:00:00:01').toString('base64url')}`]) {
      const res = await get<{ code: string }>(`/v1/devices?${q}`);
      expect([q, res.status, res.body.code]).toEqual([q, 400, 'INVALID_REQUEST']);
    }
  });

  it('needs an API key', async () => {
    const res = await app.inject({ method: 'GET', url: '/v1/devices' });
    expect([res.statusCode, res.json<{ code: string }>().code]).toEqual([401, 'UNAUTHORIZED']);
  });
});
