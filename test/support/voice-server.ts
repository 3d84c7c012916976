/**
 * A voice-server double speaking the xiaozhi server side (xinnan-tech/xiaozhi-esp32-server,
 * core/websocket_server.py, core/handle/helloHandle.py, core/providers/tools/device_mcp/*), for relay tests:
 *
 * - WebSocket on 127.0.0.1:0; reads `device-id`, `client-id`, `protocol-version`, `authorization` from the
 *   upgrade (refuses with 401 when `authorize` says no).
 * - Answers a `hello` with `{type:"hello",version,transport:"websocket",session_id,audio_params}`.
 * - `listen` `detect` gets an `stt` echo of its text followed by `tts` start/stop; binary frames are echoed
 *   back unchanged (`echoAudio`, default on).
 * - Its own MCP requests to the device (`mcp(method, params)`): integer ids from 1 and `{type:"mcp",payload}`
 *   without a session id, as the real server sends them.
 * Everything received is recorded; tests await it.
 */
import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer, type RawData } from 'ws';
import { AsyncQueue, deferred, type Deferred } from './wait.js';

export interface VoiceServerOptions {
  /** Refuse the upgrade (401) unless this says yes. Default: accept all. */
  authorize?: (headers: IncomingMessage['headers']) => boolean;
  /** Do not answer hellos (to test the relay's connect timeout). */
  silent?: boolean;
  /** Echo binary frames back. Default true. */
  echoAudio?: boolean;
  audioParams?: Record<string, unknown>;
  /** Keep every received frame for tests to read. Default true; the bench turns it off (it only echoes). */
  recordAudio?: boolean;
  /**
   * Send the MCP initialize before the hello, as xiaozhi-esp32-server can (helloHandle.py starts it as a task
   * before sending its hello); its reply is `earlyInitialize`.
   */
  initializeBeforeHello?: boolean;
}

export class VoiceServerConnection {
  readonly headers: IncomingMessage['headers'];
  /** The upgrade's path and query. */
  readonly url: string;
  readonly sessionId: string;
  /** Every JSON message received, parsed, in order. */
  readonly json: Array<Record<string, unknown>> = [];
  /** Every binary frame received, in order. */
  readonly audio: Buffer[] = [];
  readonly closed: Deferred<{ code: number; reason: string }> = deferred();
  private readonly jsonQueue = new AsyncQueue<Record<string, unknown>>();
  private readonly audioQueue = new AsyncQueue<Buffer>();
  private nextId = 1;
  /** The reply to the initialize sent before the hello (`initializeBeforeHello`). */
  earlyInitialize: Promise<Record<string, unknown>> | undefined;
  private readonly pending = new Map<number, Deferred<Record<string, unknown>>>();

  constructor(
    readonly ws: WebSocket,
    req: IncomingMessage,
    private readonly opts: VoiceServerOptions,
    sessionId: string,
  ) {
    this.headers = req.headers;
    this.url = req.url ?? '';
    this.sessionId = sessionId;
    ws.on('message', (data: RawData, isBinary: boolean) => {
      const buf = toBuffer(data);
      if (isBinary) {
        if (opts.recordAudio ?? true) {
          this.audio.push(buf);
          this.audioQueue.push(buf);
        }
        if (opts.echoAudio ?? true) ws.send(buf, { binary: true });
        return;
      }
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(buf.toString('utf8')) as Record<string, unknown>;
      } catch {
        return;
      }
      this.onJson(msg);
    });
    ws.on('close', (code: number, reason: Buffer) => this.closed.resolve({ code, reason: reason.toString() }));
  }

  private onJson(msg: Record<string, unknown>): void {
    this.json.push(msg);
    this.jsonQueue.push(msg);
    if (msg['type'] === 'hello' && !this.opts.silent) {
      if (this.opts.initializeBeforeHello)
        this.earlyInitialize = this.mcp('initialize', {
          protocolVersion: '2024-11-05',
          capabilities: {},
          clientInfo: { name: 'XiaozhiClient', version: '1.0.0' },
        });
      this.send({
        type: 'hello',
        version: 1,
        transport: 'websocket',
        session_id: this.sessionId,
        audio_params: this.opts.audioParams ?? { format: 'opus', sample_rate: 24000, channels: 1, frame_duration: 60 },
      });
    }
    if (msg['type'] === 'listen' && msg['state'] === 'detect') {
      this.send({ type: 'stt', text: String(msg['text'] ?? ''), session_id: this.sessionId });
      this.send({ type: 'tts', state: 'start', session_id: this.sessionId });
      this.send({ type: 'tts', state: 'stop', session_id: this.sessionId });
    }
    if (msg['type'] === 'mcp') {
      const payload = msg['payload'] as Record<string, unknown> | undefined;
      const id = payload?.['id'];
      if (typeof id === 'number' && ('result' in payload! || 'error' in payload!)) {
        this.pending.get(id)?.resolve(payload!);
        this.pending.delete(id);
      }
    }
  }

  send(obj: Record<string, unknown>): void {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(obj));
  }

  sendAudio(frame: Buffer): void {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(frame, { binary: true });
  }

  /** The server's own MCP request to the device; resolves with the reply payload. */
  mcp(method: string, params?: Record<string, unknown>): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    const d = deferred<Record<string, unknown>>();
    this.pending.set(id, d);
    this.send({ type: 'mcp', payload: { jsonrpc: '2.0', id, method, ...(params ? { params } : {}) } });
    return d.promise;
  }

  /** The next JSON message matching `pred` (earlier non-matching ones are skipped). */
  async nextJson(pred: (m: Record<string, unknown>) => boolean = () => true, timeoutMs = 15_000): Promise<Record<string, unknown>> {
    for (;;) {
      const m = await this.jsonQueue.next(timeoutMs, 'a JSON message at the voice server');
      if (pred(m)) return m;
    }
  }

  nextAudio(timeoutMs = 15_000): Promise<Buffer> {
    return this.audioQueue.next(timeoutMs, 'an audio frame at the voice server');
  }

  close(code = 1000, reason = ''): void {
    this.ws.close(code, reason);
  }
}

export class VoiceServerDouble {
  readonly connections = new AsyncQueue<VoiceServerConnection>();
  readonly all: VoiceServerConnection[] = [];
  /** Upgrades refused by `authorize`. */
  refused = 0;
  private sessions = 0;

  private constructor(
    private readonly wss: WebSocketServer,
    readonly url: string,
  ) {}

  static async start(opts: VoiceServerOptions = {}): Promise<VoiceServerDouble> {
    const wss = new WebSocketServer({
      host: '127.0.0.1',
      port: 0,
      perMessageDeflate: false,
      verifyClient: (info, cb) => {
        if (!opts.authorize || opts.authorize(info.req.headers)) return cb(true);
        server.refused++;
        cb(false, 401, 'Unauthorized');
      },
    });
    await new Promise<void>((resolve, reject) => {
      wss.once('listening', resolve);
      wss.once('error', reject);
    });
    const port = (wss.address() as AddressInfo).port;
    const server: VoiceServerDouble = new VoiceServerDouble(wss, `ws://127.0.0.1:${port}/xiaozhi/v1/`);
    wss.on('connection', (ws, req) => {
      const conn = new VoiceServerConnection(ws, req, opts, `vs-${++server.sessions}`);
      server.all.push(conn);
      server.connections.push(conn);
    });
    return server;
  }

  nextConnection(timeoutMs = 15_000): Promise<VoiceServerConnection> {
    return this.connections.next(timeoutMs, 'a connection at the voice server');
  }

  /** Connections currently open. */
  get openCount(): number {
    return [...this.wss.clients].filter((c) => c.readyState === WebSocket.OPEN).length;
  }

  async close(): Promise<void> {
    for (const c of this.wss.clients) c.terminate();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }
}

function toBuffer(d: RawData): Buffer {
  if (Buffer.isBuffer(d)) return d;
  if (Array.isArray(d)) return Buffer.concat(d);
  return Buffer.from(d);
}
