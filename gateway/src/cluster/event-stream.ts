import { DeliverPolicy, DiscardPolicy, jetstream, jetstreamManager, StorageType, type StreamConfig } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { ClusterConfig } from './config.js';
import type { GatewayEvent, Replay } from '../events/bus.js';
import { streamHistory } from '../events/history-stream.js';
import { EVENTS_WILDCARD, RelayedEvent } from './wire.js';

export interface EventStreamLimits {
  /** At most this many events are replayed after a `Last-Event-ID` (the bus's ring size). */
  replayLimit: number;
  /** events.history: the stream's bounds unless cluster.events sets its own. */
  history: { maxEvents: number; maxBytes: number; maxAgeMs: number };
}

const decoder = new TextDecoder();
const EVENT_ID = /^[0-9a-z]{1,32}-\d{1,15}$/;
/** How long one replay lookup may read the stream before the client gets `resync` instead. */
const FETCH_EXPIRES_MS = 5_000;

/**
 * The JetStream stream over `voxgate.events.>`: every instance's events, bounded (count, bytes, age;
 * oldest dropped). Events travel with their origin's id, so a client that resumes on any instance with
 * `Last-Event-ID` is answered from here: the events after that id, at most `replayLimit` of them.
 */
export async function openEventStream(nc: NatsConnection, config: ClusterConfig, limits: EventStreamLimits, log: Logger) {
  const { replayLimit } = limits;
  const name = config.events.stream;
  const jsm = await jetstreamManager(nc);
  const cfg: Partial<StreamConfig> & { name: string } = {
    name,
    subjects: [EVENTS_WILDCARD],
    storage: StorageType.File,
    discard: DiscardPolicy.Old,
    // The stream is the cluster's event history: its bounds are the history's unless cluster.events sets its own.
    max_msgs: config.events.maxMsgs ?? limits.history.maxEvents,
    // events.history.maxBytes counts events' data; the stream counts whole messages: the same setting, a little stricter here.
    max_bytes: config.events.maxBytes ?? limits.history.maxBytes,
    max_age: Math.round(config.events.maxAgeMs ?? limits.history.maxAgeMs) * 1_000_000, // nanoseconds
    max_msg_size: config.maxMessageBytes,
  };
  // Another instance made it first (perhaps with other limits): this instance's configuration wins.
  await jsm.streams.add(cfg).catch(() => jsm.streams.update(name, cfg));
  const js = jetstream(nc);

  /** The events after `lastId` in the stream, oldest first; undefined when the id is not in its last `replayLimit` events. */
  async function replay(lastId: string): Promise<Replay | undefined> {
    // Only an id some instance could have given is looked for: anything else costs no read of the stream.
    if (replayLimit <= 0 || !EVENT_ID.test(lastId)) return undefined;
    const { state } = await jsm.streams.info(name);
    if (state.messages === 0) return undefined;
    const from = Math.max(state.first_seq, state.last_seq - replayLimit); // one more than the limit: the id itself
    const consumer = await js.consumers.get(name, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: from });
    const batch = await consumer.fetch({ max_messages: state.last_seq - from + 1, expires: FETCH_EXPIRES_MS });
    let found = false;
    const events: GatewayEvent[] = [];
    for await (const m of batch) {
      // Whatever can publish on the account lands in the stream too: each message is parsed, junk skipped.
      const e = m.data.length <= config.maxMessageBytes ? parse(m.data) : undefined;
      if (e?.id !== undefined) {
        if (found) events.push(toEvent(e, e.id, m.info.timestampNanos / 1e6));
        else if (e.id === lastId) found = true;
      }
      if (m.seq >= state.last_seq) break;
    }
    if (!found) log.debug({ lastId }, 'Last-Event-ID not in the cluster event stream');
    return found ? { events } : undefined;
  }
  const read = streamHistory({
    js,
    jsm,
    stream: name,
    prefix: EVENTS_WILDCARD.slice(0, -2),
    parse: (data, storedAtMs) => {
      const e = data.length <= config.maxMessageBytes ? parse(data) : undefined;
      return e?.id === undefined ? undefined : toEvent(e, e.id, storedAtMs);
    },
  });
  return { replay, read };
}

/**
 * The event a stored message carries, timed by its origin (else by when the stream stored it), with the tenant it was
 * published under (none: an operator's, or a message from an instance that did not relay it yet).
 */
function toEvent(e: RelayedEvent, id: string, storedAtMs: number): GatewayEvent {
  return { id, type: e.type, deviceId: e.deviceId, at: e.at ?? new Date(storedAtMs).toISOString(), data: e.data, tenant: e.tenant ?? undefined };
}

function parse(data: Uint8Array): RelayedEvent | undefined {
  try {
    const r = RelayedEvent.safeParse(JSON.parse(decoder.decode(data)));
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}
