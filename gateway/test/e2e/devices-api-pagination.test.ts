import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

interface Page {
  devices: Array<{ id: string; online: boolean }>;
  nextCursor?: string;
}

const idOf = (n: number) => `02:00:00:00:${(n >> 8).toString(16).padStart(2, '0')}:${(n & 0xff).toString(16).padStart(2, '0')}`;

describe('GET /v1/devices pagination (issue 8, defect 10b)', () => {
  let t: TestGateway;
  const devices: ReferenceDevice[] = [];
  const ids: string[] = [];
  beforeAll(async () => {
    // Devices that connect and stay in awaiting_hello: cheap, and listed like any other.
    t = await startTestGateway({ session: { requestTimeoutMs: 120_000 } });
    // Connected in a shuffled order: the listing is ordered by id, not by arrival.
    const order = Array.from({ length: 130 }, (_, i) => (i * 47) % 130);
    for (const n of order) {
      const d = new ReferenceDevice({ deviceId: idOf(n) });
      const online = t.nextEvent('device.online', d.deviceId);
      await d.connectWebSocket(t.wsUrl, { skipHello: true });
      await online;
      devices.push(d);
    }
    ids.push(...order.map(idOf).sort());
    // Every tenth device goes offline.
    for (const d of devices.filter((x) => Number.parseInt(x.deviceId.slice(-2), 16) % 10 === 0)) {
      const offline = t.nextEvent('device.offline', d.deviceId);
      d.terminate();
      await offline;
    }
  }, 60_000);
  afterAll(async () => {
    for (const d of devices) d.terminate();
    await t.close();
  });

  async function walk(query: string): Promise<{ pages: Page[]; ids: string[] }> {
    const pages: Page[] = [];
    let cursor: string | undefined;
    do {
      const sep = query ? '&' : '';
      const res = await t.api<Page>('GET', `/v1/devices?${query}${cursor ? `${sep}cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(res.status).toBe(200);
      pages.push(res.body);
      cursor = res.body.nextCursor;
    } while (cursor !== undefined && pages.length < 100);
    return { pages, ids: pages.flatMap((p) => p.devices.map((d) => d.id)) };
  }

  it('pages by 100 by default, in id order, every device once, with nextCursor until the last page', async () => {
    const first = await t.api<Page>('GET', '/v1/devices');
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
  });

  it('refuses a bad limit or a cursor it did not give out', async () => {
    for (const q of ['limit=0', 'limit=1001', 'limit=ten', 'cursor=not*base64', `cursor=${Buffer.from('x1:02:00:00:00:00:01').toString('base64url')}`]) {
      const res = await t.api<{ code: string }>('GET', `/v1/devices?${q}`);
      expect([q, res.status, res.body.code]).toEqual([q, 400, 'INVALID_REQUEST']);
    }
  });
});
