import { describe, expect, it } from 'vitest';
import { EventBus, type Replay, type ReplaySource } from '../../src/events/bus.js';
import { createLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics.js';

const bus = (replaySource?: ReplaySource) => new EventBus({ bufferSize: 4, metrics: createMetrics(), log: createLogger('silent'), replaySource, boot: 'b1' });

describe('EventBus: Last-Event-ID through the replay source given at construction', () => {
  it('answers from its own ring when it can, without asking the source', async () => {
    const asked: string[] = [];
    const b = bus({ replay: async (id) => (asked.push(id), undefined) });
    const first = b.publish('device.online', 'aa:bb:cc:dd:ee:01')!;
    b.publish('device.offline', 'aa:bb:cc:dd:ee:01');
    const r = await b.replay(first.id);
    expect('events' in r && r.events.map((e) => e.type)).toEqual(['device.offline']);
    expect(asked).toEqual([]);
  });

  it("asks the source for an id it does not hold (another instance's), and falls back to resync", async () => {
    const remote: Replay = { events: [] };
    const found = bus({ replay: async (id) => (id === 'other-7' ? remote : undefined) });
    expect(await found.replay('other-7')).toBe(remote);
    expect(await found.replay('other-8')).toEqual({ resync: expect.any(String) });
    const failing = bus({ replay: () => Promise.reject(new Error('stream down')) });
    expect(await failing.replay('other-7')).toEqual({ resync: expect.any(String) });
    expect(await bus().replay('other-7')).toEqual({ resync: expect.any(String) });
  });
});
