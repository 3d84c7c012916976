import { describe, expect, it } from 'vitest';
import { EventBus, eventJson } from '../../src/events/bus.js';
import { fanOutToMqtt } from '../../src/events/mqtt-fanout.js';

const A = '02:00:00:00:00:0a';

describe('fanOutToMqtt', () => {
  it('publishes each event on its topic while a backend reads events, and nothing while none does', () => {
    const bus = new EventBus({ bufferSize: 10, boot: 'boot1' });
    const sent: Array<[string, string]> = [];
    let readers = false;
    fanOutToMqtt(bus, { hasEventReaders: () => readers, publish: (topic, payload) => void sent.push([topic, payload]) });
    bus.publish('device.online', A, { transport: 'websocket' });
    expect(sent).toEqual([]);
    readers = true;
    const ready = bus.publish('device.ready', A, { toolCount: 3 })!;
    expect(sent).toEqual([[`voxgate/events/${A}/device.ready`, eventJson(ready)]]);
  });
});
