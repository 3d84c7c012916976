import { eventJson, type EventBus } from './bus.js';

/** Every bus event also goes to `voxgate/events/<deviceId>/<type>` on the embedded broker. */
export function fanOutToMqtt(bus: EventBus, publish: (topic: string, payload: string) => void): () => boolean {
  return bus.subscribe((e) => publish(`voxgate/events/${e.deviceId}/${e.type}`, eventJson(e)));
}
