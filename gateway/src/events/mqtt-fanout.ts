import { eventJson, type EventBus, type GatewayEvent } from './bus.js';

/** Where backends read events on the embedded broker: `voxgate/events/<deviceId>/<type>`. */
export const EVENTS_TOPIC_PREFIX = 'voxgate/events/';
/** The filter for every event (the broker's ACL lets a backend subscribe to it or to anything under the prefix). */
export const EVENTS_TOPIC_FILTER = `${EVENTS_TOPIC_PREFIX}#`;

export function eventTopic(e: Pick<GatewayEvent, 'deviceId' | 'type'>): string {
  return `${EVENTS_TOPIC_PREFIX}${e.deviceId}/${e.type}`;
}

/** The broker's side: `hasEventReaders` false means a publish would reach no one (links/mqtt.ts). */
export interface EventBroker {
  hasEventReaders(): boolean;
  publish(topic: string, payload: string): void;
}

/** Every bus event also goes to its topic on the embedded broker, while a backend there reads events. */
export function fanOutToMqtt(bus: EventBus, broker: EventBroker): () => boolean {
  return bus.subscribe((e) => {
    if (broker.hasEventReaders()) broker.publish(eventTopic(e), eventJson(e));
  });
}
