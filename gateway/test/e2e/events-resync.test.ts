import { describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { openSse } from '../../../test/support/sse.js';

const auth = { authorization: `Bearer ${TEST_API_KEY}` };

describe('event ids across restarts and Last-Event-ID resync (issue 8, defect 10c)', () => {
  it('gives a second start ids of its own, and tells a client with an id from the first start to resync', async () => {
    const deviceId = '02:00:00:00:10:01';
    const first = await startTestGateway();
    let idsBefore: string[];
    try {
      const stream = await openSse(`${first.baseUrl}/v1/events`, auth);
      const d = new ReferenceDevice({ deviceId });
      await d.connectWebSocket(first.wsUrl);
      idsBefore = [(await stream.events.next()).id!, (await stream.events.next()).id!];
      stream.close();
      d.terminate();
    } finally {
      await first.close();
    }

    const second = await startTestGateway();
    try {
      const d = new ReferenceDevice({ deviceId });
      const ready = second.nextEvent('device.ready', deviceId);
      await d.connectWebSocket(second.wsUrl);
      const readyEvent = await ready;
      // The same sequence of events after a restart: none of its ids is one the first start gave out.
      const idsAfter = second.gw.bus.since(`${second.gw.bus.boot}-0`);
      expect('events' in idsAfter && idsAfter.events.map((e) => e.id)).toEqual([expect.any(String), readyEvent.id]);
      for (const id of idsBefore) expect('events' in idsAfter && idsAfter.events.map((e) => e.id)).not.toContain(id);

      expect(second.gw.bus.lastId).toBe(readyEvent.id);
      for (const stale of [idsBefore[1]!, '34', 'garbage']) {
        const current = second.gw.bus.lastId;
        const resumed = await openSse(`${second.baseUrl}/v1/events`, { ...auth, 'last-event-id': stale });
        const resync = await resumed.events.next();
        expect(resync.event).toBe('resync');
        expect(JSON.parse(resync.data)).toEqual({ reason: 'unknown_id', lastId: current });
        // The resync carries the current id, so the client's next reconnect resumes from here.
        expect(resync.id).toBe(current);
        d.notify('notifications/state_changed', { stale });
        const live = await resumed.events.next();
        expect(JSON.parse(live.data)).toMatchObject({ type: 'device.notification', data: { params: { stale } } });
        resumed.close();
      }
      d.terminate();
    } finally {
      await second.close();
    }
  });

  it('tells a client whose id fell out of the buffer to resync, and replays for one still in it', async () => {
    const t = await startTestGateway({ events: { bufferSize: 2 } });
    try {
      const ids = Array.from({ length: 5 }, (_, i) => t.gw.bus.publish('device.online', '02:00:00:00:10:02', { i })!.id);
      const expired = await openSse(`${t.baseUrl}/v1/events`, { ...auth, 'last-event-id': ids[0]! });
      const resync = await expired.events.next();
      expect([resync.event, JSON.parse(resync.data)]).toEqual(['resync', { reason: 'expired', lastId: ids[4] }]);
      expired.close();

      const kept = await openSse(`${t.baseUrl}/v1/events`, { ...auth, 'last-event-id': ids[3]! });
      const replayed = await kept.events.next();
      expect([replayed.event, replayed.id]).toEqual(['device.online', ids[4]]);
      kept.close();
    } finally {
      await t.close();
    }
  });
});
