import { DeliverPolicy, type JetStreamClient, type JetStreamManager, type OrderedConsumerOptions } from '@nats-io/jetstream';
import type { GatewayEvent } from './bus.js';
import { formatCursor, matches, parseCursor, type HistoryPage, type HistoryQuery } from './history.js';

export interface StreamHistoryDeps {
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** The cluster's event stream (`cluster.events.stream`) over `<prefix>.<deviceId>.<type>`. */
  stream: string;
  /** The subject prefix of every event (`voxgate.events`). */
  prefix: string;
  /** A stored message as an event; undefined for junk (anything that can publish on the account lands in the stream). */
  parse(data: Uint8Array, storedAtMs: number): GatewayEvent | undefined;
}

/** Messages one page may read at most (short pages then carry `next`): a sparse filter never reads the whole stream at once. */
const MAX_SCAN = 10_000;
/** How long one fetch may wait for the messages the consumer said were pending. */
const FETCH_EXPIRES_MS = 5_000;
/**
 * `since` is the event's time (its origin's clock), the stream starts by its own storage time (the NATS
 * server's clock): the scan starts this much earlier, and the event's `at` decides.
 */
const CLOCK_SKEW_MS = 60_000;

/**
 * The event history of a cluster: pages read from the JetStream stream every instance already writes
 * (its retention is the history's), with an ordered consumer per page. One device and/or one type are
 * filtered by the server (the subject says both); lists, and a tenant (each message says which it was published
 * under), are filtered here, as the scan reads. The cursor is a stream sequence.
 */
export function streamHistory(d: StreamHistoryDeps): (q: HistoryQuery) => Promise<HistoryPage> {
  return async (q) => {
    const { state } = await d.jsm.streams.info(d.stream);
    if (state.messages === 0) return { events: [] };
    return q.order === 'newest' ? newestFirst(d, q, state) : oldestFirst(d, q);
  };
}

/** The subject that selects what the server can: one device, one type, or both. */
function subject(d: StreamHistoryDeps, q: HistoryQuery): string {
  const one = <T>(s: ReadonlySet<T> | undefined): T | undefined => (s?.size === 1 ? [...s][0] : undefined);
  const device = one(q.devices);
  const type = one(q.types);
  return `${d.prefix}.${device ?? '*'}.${type ?? '>'}`;
}

type Visit = (seq: number, e: GatewayEvent | undefined) => boolean;

/**
 * Visit the stream's messages from `from` (a sequence or a time) under `filter`, at most `max`, until `visit`
 * says stop; what is known after: the last sequence read, and whether matching messages remain after it.
 */
async function scan(d: StreamHistoryDeps, from: { seq: number } | { time: number }, filter: string, max: number, visit: Visit) {
  const opts: Partial<OrderedConsumerOptions> = { filter_subjects: filter, inactive_threshold: 30_000 };
  if ('seq' in from) Object.assign(opts, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: Math.max(1, from.seq) });
  else Object.assign(opts, { opt_start_time: new Date(from.time).toISOString() });
  const consumer = await d.js.consumers.get(d.stream, opts);
  let last = 0;
  let more = false;
  try {
    const pending = (await consumer.info()).num_pending;
    if (pending === 0) return { last, more };
    const batch = await consumer.fetch({ max_messages: Math.min(pending, max), expires: FETCH_EXPIRES_MS });
    more = pending > max;
    for await (const m of batch) {
      last = m.seq;
      more = m.info.pending > 0;
      if (!visit(m.seq, d.parse(m.data, m.info.timestampNanos / 1e6)) || !more) break;
    }
    return { last, more };
  } finally {
    void consumer.delete().catch(() => undefined);
  }
}

async function oldestFirst(d: StreamHistoryDeps, q: HistoryQuery): Promise<HistoryPage> {
  const after = q.cursor === undefined ? undefined : parseCursor(q.cursor);
  const from = after !== undefined ? { seq: after + 1 } : q.since !== undefined ? { time: q.since - CLOCK_SKEW_MS } : { seq: 1 };
  const events: GatewayEvent[] = [];
  let lastKept = 0;
  const r = await scan(d, from, subject(d, q), MAX_SCAN, (seq, e) => {
    if (e && matches(q, e) && (q.since === undefined || Date.parse(e.at) >= q.since)) {
      events.push(e);
      lastKept = seq;
    }
    return events.length < q.limit;
  });
  // A full page goes on after its last event; a short one (the scan bound) after the last message read.
  const next = events.length >= q.limit ? lastKept : r.last;
  return r.more && next > 0 ? { events, next: formatCursor(next) } : { events };
}

/** Newest first: windows read backwards from the cursor (or the stream's end), each larger, within MAX_SCAN messages. */
async function newestFirst(d: StreamHistoryDeps, q: HistoryQuery, state: { first_seq: number; last_seq: number }): Promise<HistoryPage> {
  const before = q.cursor === undefined ? undefined : parseCursor(q.cursor);
  let end = Math.min(before === undefined ? state.last_seq : before - 1, state.last_seq);
  const found: Array<{ seq: number; e: GatewayEvent }> = [];
  let scanned = 0;
  let window = Math.max(q.limit * 4, 256);
  let reachedSince = false;
  while (end >= state.first_seq && found.length < q.limit && scanned < MAX_SCAN && !reachedSince) {
    const start = Math.max(state.first_seq, end - window + 1);
    const inWindow: Array<{ seq: number; e: GatewayEvent }> = [];
    const stop = end;
    await scan(d, { seq: start }, subject(d, q), Math.min(stop - start + 1, MAX_SCAN), (seq, e) => {
      if (seq > stop) return false;
      if (e && matches(q, e)) {
        if (q.since !== undefined && Date.parse(e.at) < q.since) reachedSince = true;
        else inWindow.push({ seq, e });
      }
      return seq < stop;
    });
    scanned += stop - start + 1;
    found.push(...inWindow.reverse());
    end = start - 1;
    window *= 4;
  }
  const page = found.slice(0, q.limit);
  // More remain before the page when the window stopped early, or when the stream goes further back.
  const oldest = page.at(-1)?.seq;
  let next: number | undefined;
  if (found.length > q.limit) next = oldest;
  else if (!reachedSince && end >= state.first_seq) next = page.length === q.limit ? oldest : end + 1;
  const events = page.map((f) => f.e);
  return next !== undefined ? { events, next: formatCursor(next) } : { events };
}
