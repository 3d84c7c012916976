import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mintVisionToken } from '@voxgate/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConfigInput } from '../../src/index.js';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { openSse, type SseStream } from '../../../test/support/sse.js';
import { upload } from '../../../test/support/vision-upload.js';

/**
 * A device moved from one tenant to another (here by an operator's PATCH; a rule or an enrollment claim moves it the
 * same way) took its past along: what was read through its device's CURRENT tenant became the new tenant's. Before,
 * the new tenant's key read the old tenant's queued calls (arguments, results; and cancelled them), its event history
 * (voice transcripts: what the old owner's people said) by page and by `Last-Event-ID` replay, and the device's photos.
 * Now a tenant's key sees a call, an event or a photo only if it was made under its tenant, while the device is still
 * its tenant's; what was made under none (an operator's) is operators' only. The operator key sees everything.
 */
const ACME_KEY = 'acme-key-moved-device-0123456789';
const GLOBEX_KEY = 'globex-key-moved-device-0123456789';
const D = '02:00:00:00:6e:01';
const as = (apiKey: string) => ({ apiKey });

interface Problem {
  code: string;
}
interface Call {
  id: string;
  state: string;
  arguments: Record<string, unknown>;
}
interface Event {
  id: string;
  type: string;
  deviceId: string;
  data: Record<string, unknown>;
}
interface Page {
  events: Event[];
  next?: string;
}

describe('a device moved to another tenant takes none of its past along', { timeout: 120_000 }, () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-moved-'));
  const config: ConfigInput = {
    apiKeys: [TEST_API_KEY, ACME_KEY, GLOBEX_KEY],
    apiKeyTenants: { [ACME_KEY]: 'acme', [GLOBEX_KEY]: 'globex' },
    vision: { url: 'http://127.0.0.1:1/mcp/vision/explain', maxPhotoBytes: 4096 },
  };
  let t: TestGateway;
  const streams: SseStream[] = [];
  /** Ids: an event before the device had a tenant (where replays start), then acme's, then globex's. */
  let marker: string;
  const acmeEra: Event[] = [];
  const globexEra: Event[] = [];
  const calls = {} as Record<'acme' | 'ops' | 'globex', string>;
  const photos = {} as Record<'acme' | 'globex', string>;

  const publish = (type: 'voice.transcript' | 'device.notification', data: Record<string, unknown>) => t.gw.bus.publish(type, D, data)! as Event;
  const queue = async (key: string, args: Record<string, unknown>) => {
    const r = await t.api<Call>('POST', `/v1/devices/${D}/calls`, { tool: 'self.mark', arguments: args }, as(key));
    expect(r.status).toBe(202);
    return r.body.id;
  };
  /** A photo the device uploads: its `device.photo` event. */
  const photo = async (question: string) => {
    const shot = t.nextEvent('device.photo', D);
    const r = await upload(`${t.baseUrl}/mcp/vision/explain`, { deviceId: D, token: mintVisionToken(t.gw.visionKey, D, Date.now() / 1000 + 60), question });
    expect(r.status).toBe(200);
    return (await shot) as Event;
  };
  const history = async (key: string, query = '') => {
    const r = await t.api<Page>('GET', `/v1/events/history?limit=1000${query}`, undefined, as(key));
    expect(r.status).toBe(200);
    return r.body;
  };
  const ofD = (p: Page) => p.events.filter((e) => e.deviceId === D).map((e) => e.id);
  /** A stream resumed after `lastId`: its first events are what it replays, oldest first. */
  const resume = async (key: string, lastId: string) => {
    const s = await openSse(`${t.baseUrl}/v1/events?device=${D}`, { authorization: `Bearer ${key}`, 'last-event-id': lastId });
    streams.push(s);
    expect(s.status).toBe(200);
    return async () => JSON.parse((await s.events.next()).data) as Event;
  };

  beforeAll(async () => {
    t = await startTestGateway(config, {}, { dataDir });
    marker = t.gw.bus.publish('device.notification', D, { method: 'before any tenant' })!.id;
    // acme's time: its call (and an operator's) for the device, offline, what its people said, a photo.
    expect((await t.api('PATCH', `/v1/devices/${D}`, { tenant: 'acme' })).status).toBe(200);
    acmeEra.push(publish('voice.transcript', { session: 's-acme', text: 'the code of the safe is 4711' }));
    calls.acme = await queue(ACME_KEY, { note: 'acme only' });
    calls.ops = await queue(TEST_API_KEY, { note: 'the operator' });
    photos.acme = String((await photo('acme: what is on the desk?')).data['photoId']);
    expect((await t.api('GET', `/v1/calls/${calls.acme}`, undefined, as(ACME_KEY))).status).toBe(200);
    expect(ofD(await history(ACME_KEY))).toContain(acmeEra[0]!.id);
    // The operator moves the device to globex.
    expect((await t.api<{ tenant: string }>('PATCH', `/v1/devices/${D}`, { tenant: 'globex' })).body.tenant).toBe('globex');
  });
  afterAll(async () => {
    for (const s of streams) s.close();
    await t?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("globex's key gets 404 for acme's (and the operator's) calls, cannot cancel them, and lists only its own", async () => {
    for (const id of [calls.acme, calls.ops]) {
      const read = await t.api<Problem>('GET', `/v1/calls/${id}`, undefined, as(GLOBEX_KEY));
      expect([read.status, read.body.code]).toEqual([404, 'NOT_FOUND']);
      const cancel = await t.api<Problem>('DELETE', `/v1/calls/${id}`, undefined, as(GLOBEX_KEY));
      expect([cancel.status, cancel.body.code]).toEqual([404, 'NOT_FOUND']);
    }
    calls.globex = await queue(GLOBEX_KEY, { note: 'globex' });
    const listed = await t.api<{ calls: Call[]; nextCursor?: string }>('GET', `/v1/devices/${D}/calls`, undefined, as(GLOBEX_KEY));
    expect(listed.body).toEqual({ calls: [expect.objectContaining({ id: calls.globex, arguments: { note: 'globex' } })] });
    // A page of one says nothing of the calls it leaves out: no cursor to a page that would be empty.
    const one = await t.api<{ calls: Call[]; nextCursor?: string }>('GET', `/v1/devices/${D}/calls?limit=1`, undefined, as(GLOBEX_KEY));
    expect([one.body.calls.map((c) => c.id), one.body.nextCursor]).toEqual([[calls.globex], undefined]);
    expect((await t.api('GET', `/v1/calls/${calls.globex}`, undefined, as(GLOBEX_KEY))).status).toBe(200);
  });

  it('acme no longer sees the device, nor its own calls on it (as before); the operator sees every call', async () => {
    expect((await t.api('GET', `/v1/calls/${calls.acme}`, undefined, as(ACME_KEY))).status).toBe(404);
    expect((await t.api<Problem>('GET', `/v1/devices/${D}/calls`, undefined, as(ACME_KEY))).body.code).toBe('DEVICE_NOT_FOUND');
    const ops = await t.api<{ calls: Call[] }>('GET', `/v1/devices/${D}/calls`);
    expect(ops.body.calls.map((c) => c.id)).toEqual([calls.acme, calls.ops, calls.globex]);
    // Still queued: globex's DELETE above did not cancel it. The operator cancels it now: its call.state event is acme's.
    const acme = await t.api<Call>('GET', `/v1/calls/${calls.acme}`);
    expect([acme.body.state, acme.body.arguments]).toEqual(['queued', { note: 'acme only' }]);
    expect((await t.api<Call>('DELETE', `/v1/calls/${calls.acme}`)).body.state).toBe('cancelled');
  });

  it("globex's key reads none of acme's events in the history, and the new ones of the device", async () => {
    const said = publish('voice.transcript', { session: 's-globex', text: 'hello from globex' });
    const page = await history(GLOBEX_KEY);
    // Its own call's call.state (queued), its own transcript: nothing of acme's (the transcript, acme's calls'
    // call.state events, even the cancel made after the move, the photo's event), nothing from before either had it.
    expect(page.events.map((e) => [e.type, e.data['callId'] ?? e.data['text']])).toEqual([
      ['call.state', calls.globex],
      ['voice.transcript', 'hello from globex'],
    ]);
    expect(page.events.at(-1)!.id).toBe(said.id);
    globexEra.push(...page.events);
    expect(JSON.stringify(page)).not.toContain('4711');
    // The tenant an event was published under is the gateway's: never served.
    expect(page.events.every((e) => !('tenant' in e))).toBe(true);
    // Filtered by its device, by type, newest first, in pages: the same events, and no page to follow past them.
    expect(ofD(await history(GLOBEX_KEY, `&device=${D}`))).toEqual(globexEra.map((e) => e.id));
    expect(ofD(await history(GLOBEX_KEY, `&device=${D}&type=voice.transcript`))).toEqual([globexEra.at(-1)!.id]);
    expect(ofD(await history(GLOBEX_KEY, `&order=newest`))).toEqual(globexEra.map((e) => e.id).reverse());
    const p1 = (await t.api<Page>('GET', `/v1/events/history?device=${D}&limit=${globexEra.length}`, undefined, as(GLOBEX_KEY))).body;
    expect([p1.events.map((e) => e.id), p1.next]).toEqual([globexEra.map((e) => e.id), undefined]);
    // acme's key: nothing of the device any more (as before); the operator: everything.
    expect(ofD(await history(ACME_KEY))).toEqual([]);
    expect(ofD(await history(ACME_KEY, `&device=${D}`))).toEqual([]);
    const all = ofD(await history(TEST_API_KEY));
    expect(all[0]).toBe(marker);
    expect(all).toEqual(expect.arrayContaining([acmeEra[0]!.id, ...globexEra.map((e) => e.id)]));
  });

  it("globex's Last-Event-ID replay from before the move carries none of acme's events; the operator's carries them", async () => {
    const globex = await resume(GLOBEX_KEY, marker);
    for (const e of globexEra) expect((await globex()).id).toBe(e.id);
    // Then live: the next event of its device, nothing between.
    const live = publish('device.notification', { method: 'after the move' });
    expect((await globex()).id).toBe(live.id);
    globexEra.push(live);
    const ops = await resume(TEST_API_KEY, marker);
    expect((await ops()).id).toBe(acmeEra[0]!.id);
  });

  it("photos: globex's key sees only those taken since the device is its own", async () => {
    const shot = await photo('globex: what is on the shelf?');
    globexEra.push(shot);
    photos.globex = String(shot.data['photoId']);
    const list = async (key: string) => (await t.api<{ photos: Array<{ id: string }> }>('GET', `/v1/devices/${D}/photos`, undefined, as(key))).body.photos;
    expect((await list(GLOBEX_KEY)).map((p) => p.id)).toEqual([photos.globex]);
    expect(await list(GLOBEX_KEY)).toEqual([expect.not.objectContaining({ tenant: expect.anything() })]);
    const theirs = await t.api<Problem>('GET', `/v1/devices/${D}/photos/${photos.acme}`, undefined, as(GLOBEX_KEY));
    expect([theirs.status, theirs.body.code]).toEqual([404, 'NOT_FOUND']);
    expect((await fetch(`${t.baseUrl}/v1/devices/${D}/photos/${photos.globex}`, { headers: { authorization: `Bearer ${GLOBEX_KEY}` } })).status).toBe(200);
    expect((await list(TEST_API_KEY)).map((p) => p.id)).toEqual([photos.globex, photos.acme]);
  });

  it("after a restart: the kept history, its replay and the photos still tell acme's from globex's", async () => {
    await t.close();
    t = await startTestGateway(config, {}, { dataDir });
    // The ring is new: the replay is read from the kept history (events/history-sqlite.ts).
    const globex = await resume(GLOBEX_KEY, marker);
    for (const e of globexEra) expect((await globex()).id).toBe(e.id);
    const live = t.gw.bus.publish('device.notification', D, { method: 'after the restart' })!;
    expect((await globex()).id).toBe(live.id);
    expect(ofD(await history(GLOBEX_KEY))).toEqual([...globexEra.map((e) => e.id), live.id]);
    expect((await t.api<{ photos: Array<{ id: string }> }>('GET', `/v1/devices/${D}/photos`, undefined, as(GLOBEX_KEY))).body.photos.map((p) => p.id)).toEqual([
      photos.globex,
    ]);
    expect((await t.api('GET', `/v1/calls/${calls.acme}`, undefined, as(GLOBEX_KEY))).status).toBe(404);
  });
});
