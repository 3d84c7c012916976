import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isolatedEnv, startCompiledGateway, type GatewayProcess } from '../../../test/support/gateway-process.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { openSse, type SseStream } from '../../../test/support/sse.js';

// Process tests wait for events (a log line, an exit, an SSE frame), never for a fixed budget: only the
// test's own timeout bounds them, and each wait is generous for a loaded machine.
const PROCESS_TEST_MS = 180_000;
const WAIT_MS = 60_000;
const KEY = 'history-test-key';
const auth = { authorization: `Bearer ${KEY}` };
const DEVICE = '02:00:00:00:23:01';

interface Event {
  id: string;
  type: string;
  deviceId: string;
  at: string;
  data: Record<string, unknown>;
}

async function start(dataDir: string): Promise<{ run: GatewayProcess; base: string; ws: string }> {
  const run = startCompiledGateway(isolatedEnv(dataDir, { GATEWAY_API_KEYS: KEY, GATEWAY_LOG_LEVEL: 'info' }));
  const started = (await run.logLine('voxgate started')) as { http: string };
  return { run, base: `http://${started.http}`, ws: `ws://${started.http}/xiaozhi/v1/` };
}

async function history(base: string, query: string): Promise<{ events: Event[]; next?: string }> {
  const res = await fetch(`${base}/v1/events/history?${query}`, { headers: auth });
  expect(res.status).toBe(200);
  return (await res.json()) as { events: Event[]; next?: string };
}

/** The next SSE frame of `type` (others skipped). */
async function nextOf(stream: SseStream, type: string): Promise<Event> {
  for (;;) {
    const e = await stream.events.next(WAIT_MS, `SSE ${type}`);
    if (e.event === type) return JSON.parse(e.data) as Event;
  }
}

describe('event history across restarts (issue 23: History)', () => {
  it(
    'keeps a real device’s events through SIGTERM and SIGKILL: read back in pages, and Last-Event-ID resumes past the restart',
    async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-history-'));
      writeFileSync(join(dataDir, 'gateway.config.json'), '{}');
      const runs: GatewayProcess[] = [];
      try {
        // First start: a device comes online, gets ready, sends a notification; SIGTERM while it is connected.
        const first = await start(dataDir);
        runs.push(first.run);
        const live = await openSse(`${first.base}/v1/events`, auth);
        const d = new ReferenceDevice({ deviceId: DEVICE });
        await d.connectWebSocket(first.ws);
        const online = await nextOf(live, 'device.online');
        await nextOf(live, 'device.ready');
        d.notify('notifications/state_changed', { n: 1 });
        await nextOf(live, 'device.notification');
        live.close();
        first.run.child.kill('SIGTERM');
        expect((await d.closed()).code).toBe(1001);
        expect(await first.run.exited).toEqual({ code: 0, signal: null });

        // Second start: the first start's events, the offline published during the shutdown included.
        const second = await start(dataDir);
        runs.push(second.run);
        const all = await history(second.base, `device=${DEVICE}`);
        expect(all.events.map((e) => e.type)).toEqual(['device.online', 'device.ready', 'device.notification', 'device.offline']);
        expect(all.events[0]).toEqual(online);
        expect(all.next).toBeUndefined();
        // In pages joined by `next`, oldest first; and newest first for a timeline.
        const p1 = await history(second.base, `device=${DEVICE}&limit=3`);
        expect(p1.next).toEqual(expect.any(String));
        const p2 = await history(second.base, `device=${DEVICE}&limit=3&cursor=${p1.next}`);
        expect([...p1.events, ...p2.events]).toEqual(all.events);
        expect(p2.next).toBeUndefined();
        expect((await history(second.base, 'order=newest&limit=1')).events.map((e) => e.type)).toEqual(['device.offline']);
        expect((await history(second.base, 'type=device.ready,device.offline')).events.map((e) => e.type)).toEqual(['device.ready', 'device.offline']);
        expect((await history(second.base, `since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`)).events).toEqual([]);
        for (const bad of ['limit=0', 'limit=5000', 'type=device.bogus', 'device=not-a-mac', 'since=yesterday', 'cursor=abc']) {
          const res = await fetch(`${second.base}/v1/events/history?${bad}`, { headers: auth });
          expect([bad, res.status]).toEqual([bad, 400]);
        }
        expect((await fetch(`${second.base}/v1/events/history`)).status).toBe(401);

        // A client that saw the first start's online event resumes past the restart, then gets live events.
        const resumed = await openSse(`${second.base}/v1/events`, { ...auth, 'last-event-id': online.id });
        const replayed = [await resumed.events.next(WAIT_MS), await resumed.events.next(WAIT_MS), await resumed.events.next(WAIT_MS)];
        expect(replayed.map((e) => [e.event, e.id])).toEqual(all.events.slice(1).map((e) => [e.type, e.id]));
        const again = new ReferenceDevice({ deviceId: DEVICE });
        await again.connectWebSocket(second.ws);
        const onlineAgain = await nextOf(resumed, 'device.online');
        expect(onlineAgain.id.split('-')[0]).not.toBe(online.id.split('-')[0]); // this start's id
        await nextOf(resumed, 'device.ready');
        resumed.close();
        // A read writes what waits: after it, even a SIGKILL keeps these events.
        const beforeKill = await history(second.base, `device=${DEVICE}`);
        expect(beforeKill.events.map((e) => e.type).slice(-2)).toEqual(['device.online', 'device.ready']);
        second.run.child.kill('SIGKILL');
        await second.run.exited;
        again.terminate();

        const third = await start(dataDir);
        runs.push(third.run);
        const afterKill = await history(third.base, `device=${DEVICE}`);
        expect(afterKill.events.map((e) => e.id)).toEqual(beforeKill.events.map((e) => e.id));
        third.run.child.kill('SIGTERM');
        expect(await third.run.exited).toEqual({ code: 0, signal: null });
      } finally {
        for (const r of runs) r.child.kill('SIGKILL');
        await Promise.all(runs.map((r) => r.exited));
        rmSync(dataDir, { recursive: true, force: true });
      }
    },
    PROCESS_TEST_MS,
  );
});
