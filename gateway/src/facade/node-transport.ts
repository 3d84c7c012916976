import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  DEFAULT_NEGOTIATED_PROTOCOL_VERSION,
  isInitializeRequest,
  SUPPORTED_PROTOCOL_VERSIONS,
  type AuthInfo,
  type JSONRPCMessage,
  type JSONRPCRequest,
  type MessageExtraInfo,
  type RequestId,
  type Transport,
  type TransportSendOptions,
} from '@modelcontextprotocol/server';
import type { SessionEventStore } from './event-store.js';
import type { FastEntry } from './fast-call.js';
import { isRequest, isResponse } from './jsonrpc-message.js';
import { sseHeaders, SseStream, type HeldStreams } from './sse-stream.js';
import { messageEvent, primingEvent, replayAfter } from './stream-events.js';
import { getRefusal, header, postMessages, replyError, sessionRefusal, versionRefusal, type Refusal } from './transport-refusals.js';

/**
 * The server side of one Streamable HTTP session (`Mcp-Session-Id`) on Node's own request and response: the
 * SDK's `Transport`, so the SDK's protocol layer (initialize, capabilities, handlers) is unchanged, but without
 * the web `Request`/`Response`/`ReadableStream` the SDK's Node adapter builds per request, and with messages
 * checked by hand (`jsonrpc-message.ts`). It follows the SDK's `WebStandardStreamableHTTPServerTransport`
 * (2.4) in every answer it gives: statuses, JSON-RPC error codes and messages, SSE framing, priming events,
 * resumability through the event store, one GET stream per session, DELETE. Issue 21: the SDK's transport was
 * most of /mcp's CPU and allocation per call. One difference: a POST's lone request whose answer is the first thing
 * its stream would carry is answered as plain `application/json` (see `send`), where the SDK's transport, unless
 * told `enableJsonResponse`, always streams; and a resumption (Last-Event-ID) of a stream that still has a
 * connection takes it over (see `replay`), where the SDK's answers 409; and a GET stream is primed as a POST's is (see
 * `get`), where the SDK's primes only a POST's. Not carried over: the SDK's own Host/Origin
 * checks (the endpoint makes its own) and scope challenges (the facade registers no tool that declares one).
 */
export interface NodeSessionTransportOptions {
  sessionIdGenerator: () => string;
  eventStore: SessionEventStore;
  /** Suggested in each priming event: how soon a client reconnects after a drop. */
  retryInterval: number;
  onsessioninitialized: (id: string) => void;
  onsessionclosed: (id: string) => void | Promise<void>;
  /** Where POST answers wait for their first event (shared by the endpoint's sessions). */
  held: HeldStreams;
  /** Told when one of the session's streams is cut for what its client left unread (sse-stream.ts). */
  onUnreadCut?: () => void;
}

const STANDALONE = '_GET_stream';

interface Stream {
  sse: SseStream;
  /** The POST's requests (a lone request's answer may leave as plain JSON). */
  requests: number;
  /** Event ids sent by a replay, not to be sent again live. */
  replayed?: Set<string>;
}

/** What a handler sees as `ctx.http.req`: the headers only (all the facade reads). */
const requestView = (req: IncomingMessage) =>
  ({
    headers: {
      get: (name: string): string | null => {
        const v = req.headers[name.toLowerCase()];
        return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
      },
    },
  }) as unknown as Request;

export class NodeSessionTransport implements Transport {
  sessionId: string | undefined;
  onclose: (() => void) | undefined;
  onerror: ((error: Error) => void) | undefined;
  onmessage: (<T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void) | undefined;

  /** When a client last let go of one of this session's streams (ms since the epoch; 0: never): see session-table.ts. */
  lastStreamClosed = 0;

  private started = false;
  private initialized = false;
  private closed = false;
  private supported: readonly string[] = SUPPORTED_PROTOCOL_VERSIONS;
  private readonly streams = new Map<string, Stream>();
  private readonly requestStream = new Map<RequestId, string>();
  private readonly answered = new Map<RequestId, JSONRPCMessage>();
  /** Where a request goes when the server offers a direct entry (see useRequestEntry); else `onmessage`. */
  private requestEntry: ((m: JSONRPCRequest, extra: MessageExtraInfo) => void) | undefined;
  /** Voxgate's own dispatcher for a lone tools/call (fast-call.ts); it says false for what the SDK must serve. */
  private fastEntry: FastEntry | undefined;

  constructor(private readonly o: NodeSessionTransportOptions) {}

  /**
   * Requests go straight to the SDK protocol's request entry (`_onrequest`, what its `onmessage` calls for a
   * request). That `onmessage` first classifies each message with up to four zod parses, the two that fail on a
   * request building issue objects: ~3 % of /mcp's CPU per call (issue 21). This transport has checked every
   * message with the SDK schemas' rules already (jsonrpc-message.ts), so it knows a request is one. Called after
   * `connect`; without such an entry (another SDK version) everything goes through `onmessage` as before.
   */
  useRequestEntry(protocol: object): void {
    const entry = (protocol as { _onrequest?: unknown })._onrequest;
    if (typeof entry === 'function' && this.onmessage) this.requestEntry = (m, extra) => void entry.call(protocol, m, extra);
  }

  /** A lone request goes to `entry` first (fast-call.ts); what it declines goes to the SDK as before. */
  useFastEntry(entry: FastEntry | undefined): void {
    this.fastEntry = entry;
  }

  start(): Promise<void> {
    if (this.started) return Promise.reject(new Error('Transport already started'));
    this.started = true;
    return Promise.resolve();
  }

  setSupportedProtocolVersions(versions: string[]): void {
    this.supported = versions;
  }

  /** Answers one request of this session; never throws (a failure is a JSON-RPC error answer). */
  async handleRequest(req: IncomingMessage, res: ServerResponse, body: unknown, authInfo: AuthInfo | undefined): Promise<void> {
    try {
      if (this.closed) return replyError(res, 404, -32001, 'Session not found');
      switch (req.method) {
        case 'POST':
          return await this.post(req, res, body, authInfo);
        case 'GET':
          return await this.get(req, res);
        case 'DELETE':
          return await this.delete(req, res);
        default:
          this.onerror?.(new Error('Method not allowed.'));
          res.setHeader('allow', 'GET, POST, DELETE');
          return replyError(res, 405, -32000, 'Method not allowed.');
      }
    } catch (e) {
      this.onerror?.(e as Error);
      if (!res.headersSent) replyError(res, 400, -32700, 'Parse error', String(e));
      else if (!res.writableEnded) res.end();
    }
  }

  private async post(req: IncomingMessage, res: ServerResponse, body: unknown, authInfo: AuthInfo | undefined): Promise<void> {
    const messages = postMessages(req, body);
    if (!Array.isArray(messages)) return this.fail(res, messages);
    if (this.closed) return replyError(res, 404, -32001, 'Session not found');
    // `initialize` by its method first: the SDK's full check runs only on a message that names it.
    const init = messages.find((m) => 'method' in m && m.method === 'initialize' && isInitializeRequest(m)) as
      (JSONRPCMessage & { params: { protocolVersion: string } }) | undefined;
    if (init) {
      if (this.initialized && this.sessionId !== undefined)
        return this.fail(res, { status: 400, code: -32600, message: 'Invalid Request: Server already initialized' });
      if (messages.length > 1) return this.fail(res, { status: 400, code: -32600, message: 'Invalid Request: Only one initialization request is allowed' });
      this.sessionId = this.o.sessionIdGenerator();
      this.initialized = true;
      await Promise.resolve(this.o.onsessioninitialized(this.sessionId));
    } else if (!this.sessionOk(req, res)) return;
    if (this.closed) return replyError(res, 404, -32001, 'Session not found');

    if (!messages.some(isRequest)) {
      const request = requestView(req);
      for (const m of messages) this.onmessage?.(m, { authInfo, request });
      res.writeHead(202).end();
      return;
    }
    const version = init ? init.params.protocolVersion : (header(req, 'mcp-protocol-version') ?? DEFAULT_NEGOTIATED_PROTOCOL_VERSION);
    this.openStream(res, messages, version);
    const lone = messages.length === 1 ? messages[0]! : undefined;
    if (lone && this.fastEntry && isRequest(lone) && this.fastEntry(lone, req)) return;
    const resumable = this.emptyDataOk(version);
    const request = requestView(req);
    for (const m of messages) {
      const extra: MessageExtraInfo = { authInfo, request };
      if (isRequest(m) && resumable) {
        extra.closeSSEStream = () => this.closeSSEStream(m.id);
        extra.closeStandaloneSSEStream = () => this.endStream(STANDALONE);
      }
      if (this.requestEntry && isRequest(m)) this.requestEntry(m, extra);
      else this.onmessage?.(m, extra);
    }
  }

  /** The SSE stream (held) that answers a POST's requests. */
  private openStream(res: ServerResponse, messages: readonly JSONRPCMessage[], version: string): void {
    const streamId = randomUUID();
    const sse = new SseStream(res, sseHeaders(this.sessionId), this.o.held, this.primer);
    sse.oncut = this.o.onUnreadCut;
    sse.hold();
    sse.oncancel = this.forgetCancelled;
    let requests = 0;
    for (const m of messages)
      if (isRequest(m)) {
        this.requestStream.set(m.id, streamId);
        requests++;
      }
    this.streams.set(streamId, { sse, requests });
    if (this.emptyDataOk(version)) sse.primeWith(streamId);
  }

  /**
   * A POST's stream whose client went away is forgotten. One handler for every POST, not a closure per request over
   * its stream id and record: with that closure (and the random stream id) each request's objects stayed reachable
   * to V8's young collections until a full one, so the gateway promoted ~4 KB per call (issue 21, `mcpc1`).
   */
  private readonly forgetCancelled = (sse: SseStream): void => {
    this.lastStreamClosed = Date.now();
    for (const [id, s] of this.streams)
      if (s.sse === sse) {
        this.streams.delete(id);
        return;
      }
  };

  private async get(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const refused = getRefusal(req);
    if (refused) return this.fail(res, refused);
    if (!this.sessionOk(req, res)) return;
    const lastEventId = header(req, 'last-event-id');
    if (lastEventId) return this.replay(res, lastEventId);
    if (this.streams.has(STANDALONE)) return this.fail(res, { status: 409, code: -32000, message: 'Conflict: Only one SSE stream is allowed per session' });
    const sse = new SseStream(res, sseHeaders(this.sessionId), undefined, this.primer);
    sse.oncut = this.o.onUnreadCut;
    // Primed as a POST's stream is (the SDK's server primes only those): a client that loses its GET stream before
    // the first notification resumes from this id and is sent what it missed; without it, it came back empty-handed.
    if (this.emptyDataOk(header(req, 'mcp-protocol-version') ?? DEFAULT_NEGOTIATED_PROTOCOL_VERSION)) sse.primeWith(STANDALONE);
    const stream: Stream = { sse, requests: 0 };
    sse.oncancel = () => {
      this.lastStreamClosed = Date.now();
      if (this.streams.get(STANDALONE) === stream) this.streams.delete(STANDALONE);
    };
    this.streams.set(STANDALONE, stream);
    sse.flush();
  }

  private async replay(res: ServerResponse, lastEventId: string): Promise<void> {
    try {
      const replay = await replayAfter(this.o.eventStore, lastEventId, res, this.sessionId, this.o.onUnreadCut);
      if (!replay) return this.fail(res, { status: 400, code: -32000, message: 'Invalid event ID format' });
      const { streamId: replayedId, sse, replayed } = replay;
      if (this.closed || !sse.open) {
        sse.oncancel = undefined;
        return replyError(res, 404, -32001, 'Session not found');
      }
      // A stream that still has a connection is taken over, not refused with 409 as the SDK's transport does: a
      // client resumes only a stream it lost, and the server may not have seen that connection end (half-open after a
      // network change). Refused, the SDK client retried a few times and gave up, and the session heard nothing more.
      // The older connection is ended here, once the replay is written.
      this.endStream(replayedId);
      const stream: Stream = { sse, replayed, requests: 0 };
      sse.oncancel = () => {
        this.lastStreamClosed = Date.now();
        if (this.streams.get(replayedId) === stream) this.streams.delete(replayedId);
      };
      this.streams.set(replayedId, stream);
      // A request's stream whose answers were all sent ends after the replay; the GET stream stays open.
      if (replayedId !== STANDALONE && ![...this.requestStream.values()].includes(replayedId)) {
        this.streams.delete(replayedId);
        sse.end();
      } else sse.flush();
    } catch (e) {
      this.onerror?.(e as Error);
      if (!res.headersSent) replyError(res, 500, -32000, 'Error replaying events');
    }
  }

  private async delete(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!this.sessionOk(req, res)) return;
    try {
      await Promise.resolve(this.o.onsessionclosed(this.sessionId!));
      res.writeHead(200).end();
    } finally {
      await this.close();
    }
  }

  /**
   * Whether a client holds a stream of this session: its GET stream (or a resumed one), or a POST whose answer is
   * still open. A session without one is one the endpoint may evict to admit another of the same key.
   */
  hasOpenStream(): boolean {
    for (const s of this.streams.values()) if (s.sse.open) return true;
    return false;
  }

  /** Whether the request names this session, in a protocol version it speaks; else it is refused (transport-refusals.ts). */
  private sessionOk(req: IncomingMessage, res: ServerResponse): boolean {
    const refused = sessionRefusal(req, this.initialized, this.sessionId) ?? versionRefusal(req, this.supported);
    if (refused) this.fail(res, refused);
    return refused === undefined;
  }

  private emptyDataOk(version: string): boolean {
    return this.supported.includes(version) && version >= '2025-11-25';
  }

  /** Makes a stream's priming event (stream-events.ts): one function per transport, not one per request. */
  private readonly primer = (streamId: string): string => primingEvent(this.o.eventStore, streamId, this.o.retryInterval);

  private closeSSEStream(requestId: RequestId): void {
    const streamId = this.requestStream.get(requestId);
    if (streamId) this.endStream(streamId);
  }

  /** Ends a stream and forgets it (the client may resume it with Last-Event-ID). */
  private endStream(streamId: string): void {
    this.streams.get(streamId)?.sse.end();
    this.streams.delete(streamId);
  }

  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const response = isResponse(message);
    const requestId = response ? message.id : options?.relatedRequestId;
    if (requestId === undefined) {
      if (response) throw new Error('Cannot send a response on a standalone SSE stream unless resuming a previous client request');
      const text = JSON.stringify(message);
      const eventId = this.o.eventStore.storeText(STANDALONE, text, true);
      const s = this.streams.get(STANDALONE);
      if (s && !s.replayed?.has(eventId)) this.writeEvent(s, text, eventId);
      return;
    }
    const streamId = this.requestStream.get(requestId);
    if (!streamId) throw new Error(`No connection established for request ID: ${String(requestId)}`);
    const text = JSON.stringify(message);
    const s = this.streams.get(streamId);
    // A POST's lone request answered before anything else was sent on its stream: the answer is the whole body, as
    // plain JSON (the client accepts both; the spec allows either). No SSE framing, no event to keep for a resume
    // (there is no stream to resume), so the answer's path to the socket is shorter (issue 21, `mcpc1b`).
    if (response && s?.requests === 1 && s.sse.answerJson(text, this.jsonHeaders())) {
      if (this.streams.get(streamId) === s) this.streams.delete(streamId);
      this.requestStream.delete(requestId);
      return;
    }
    s?.sse.primeNow();
    const eventId = this.o.eventStore.storeText(streamId, text, true);
    if (s && !s.replayed?.has(eventId)) this.writeEvent(s, text, eventId);
    if (!response) return;
    this.answered.set(requestId, message);
    const related: RequestId[] = [];
    for (const [id, sid] of this.requestStream) if (sid === streamId) related.push(id);
    if (!related.every((id) => this.answered.has(id))) return;
    // Every request on this stream is answered: the stream ends (its answers stay in the event store).
    if (s) {
      s.sse.end();
      if (this.streams.get(streamId) === s) this.streams.delete(streamId);
    }
    for (const id of related) {
      this.answered.delete(id);
      this.requestStream.delete(id);
    }
  }

  /** The headers of a JSON answer (the length is added by the stream). */
  private jsonHeaders(): Record<string, string> {
    return this.sessionId === undefined ? { 'content-type': 'application/json' } : { 'content-type': 'application/json', 'mcp-session-id': this.sessionId };
  }

  private writeEvent(s: Stream, text: string, eventId: string): void {
    if (!s.sse.write(messageEvent(text, eventId))) s.sse.end();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const s of this.streams.values()) s.sse.end();
    this.streams.clear();
    this.answered.clear();
    this.onclose?.();
  }

  private fail(res: ServerResponse, { status, code, message }: Refusal): void {
    this.onerror?.(new Error(message));
    replyError(res, status, code, message);
  }
}
