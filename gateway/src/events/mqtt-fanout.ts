import { eventJson, type EventBus, type GatewayEvent } from './bus.js';

/** Where backends read events on the embedded broker: `voxgate/events/<deviceId>/<type>`. */
export const EVENTS_TOPIC_PREFIX = 'voxgate/events/';
/** The filter for every event (the broker's ACL lets a backend subscribe to it or to anything under the prefix). */
export const EVENTS_TOPIC_FILTER = `${EVENTS_TOPIC_PREFIX}#`;

export function eventTopic(e: Pick<GatewayEvent, 'deviceId' | 'type'>): string {
  return `${EVENTS_TOPIC_PREFIX}${e.deviceId}/${e.type}`;
}

/** Every bus event also goes to its topic on the embedded broker. */
export function fanOutToMqtt(bus: EventBus, publish: (topic: string, payload: string) => void): () => boolean {
  return bus.subscribe((e) => publish(eventTopic(e), eventJson(e)));
}
