/**
 * Stand-in speech providers speaking the real wire formats, for tests of voice.mode "converse":
 *
 * - `startSpeechServer()`: an OpenAI-compatible HTTP server on 127.0.0.1:0 with
 *   `POST /v1/audio/transcriptions` (multipart/form-data: `file` must be a WAV, 16 kHz, 16-bit, mono with exact
 *   RIFF sizes, else 400 as the real API answers a bad file; `model`, optional `language`; replies `{text}` or,
 *   with `response_format: "text"`, the bare text) and `POST /v1/audio/speech` (JSON `{model, input, voice,
 *   response_format: "pcm" | "wav"}`; streams 24 kHz 16-bit mono PCM, or a WAV with the streaming header
 *   OpenAI sends: sizes 0xFFFFFFFF). Point the `openai` SDK at `server.url` (it ends in /v1).
 * - `startEdgeTtsServer()`: a WebSocket server speaking Microsoft Edge's read-aloud wire format (text frames
 *   with `Path:speech.config` then `Path:ssml` in; `turn.start`, `response`, binary `Path:audio` frames with a
 *   2-byte big-endian header length, `audio.metadata` and `turn.end` out). Audio is MP3 (lamejs) when asked
 *   for an `audio-24khz-*-mono-mp3` format, raw PCM when asked for `raw-24khz-16bit-mono-pcm`.
 *
 * Each request gets the reply of the current script (a function of the request; replaceable), with optional
 * delay, HTTP failure, a hang until the client goes away, or a hold on a promise. Every request is recorded,
 * with an `aborted` promise resolving when the client closed the connection before the reply ended.
 * `speechPcm(text)` gives deterministic speech-like audio; `espeakWav(text)` real speech from espeak-ng.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';

/** What every stand-in reply can ask for besides its content. */
export interface StandInFault {
  /** Wait this long before answering. */
  delayMs?: number;
  /** Before answering, wait for this. */
  hold?: Promise<void>;
  /** Answer with this HTTP status (and `error` as the OpenAI error message) instead. */
  status?: number;
  error?: string;
  /** Never answer: hold the connection until the client goes away. */
  hang?: boolean;
}

export interface TranscriptionReply extends StandInFault {
  /** The transcript (default ''). */
  text?: string;
}

export interface SpeechReply extends StandInFault {
  /** 24 kHz 16-bit mono PCM to send (default: `speechPcm(input)`). */
  pcm?: Int16Array;
  /** Bytes per streamed chunk (default 4800: 100 ms). */
  chunkBytes?: number;
  /** Pause between chunks (default 0). */
  chunkDelayMs?: number;
  /** Stop after this many chunks and destroy the connection (a provider dying mid-stream). */
  failAfterChunks?: number;
}

export interface TranscriptionRequest {
  /** Every multipart text field (`model`, `language`, `response_format`, …). */
  fields: Record<string, string>;
  model: string;
  language: string | undefined;
  /** The `file` part's bytes, its file name and content type. */
  wav: Buffer;
  fileName: string;
  fileType: string;
  /** Why the WAV was refused ('' when it is a valid 16 kHz 16-bit mono WAV with exact sizes). */
  wavProblem: string;
  /** The PCM samples of a valid WAV (empty otherwise). */
  samples: Int16Array;
  headers: IncomingMessage['headers'];
  aborted: Promise<void>;
}

export interface SpeechRequest {
  body: Record<string, unknown>;
  model: string;
  input: string;
  voice: string;
  responseFormat: string;
  headers: IncomingMessage['headers'];
  aborted: Promise<void>;
  /** Whether the whole reply has been written (a request still streaming, or aborted, is not). */
  complete(): boolean;
}

export type TranscriptionScript = (req: TranscriptionRequest, index: number) => TranscriptionReply | Promise<TranscriptionReply>;
export type SpeechScript = (req: SpeechRequest, index: number) => SpeechReply | Promise<SpeechReply>;

export interface SpeechServerOptions {
  transcribe?: TranscriptionScript | TranscriptionReply;
  speak?: SpeechScript | SpeechReply;
}

export interface SpeechServer {
  /** Base URL for the OpenAI SDK (`http://127.0.0.1:<port>/v1`). */
  url: string;
  transcriptions: TranscriptionRequest[];
  speeches: SpeechRequest[];
  /** Replace the transcription script (its index counts from this call). */
  onTranscribe(script: TranscriptionScript | TranscriptionReply): void;
  /** Replace the speech script (its index counts from this call). */
  onSpeak(script: SpeechScript | SpeechReply): void;
  /** Connections currently open (0: nothing left running). */
  openConnections(): number;
  /** Requests being answered now, per endpoint, and the most at once so far: the concurrency the server saw. */
  inFlight: { transcriptions: number; speeches: number };
  peak: { transcriptions: number; speeches: number };
  close(): Promise<void>;
}

const MAX_UPLOAD = 26 * 1024 * 1024;
export const STAND_IN_TTS_RATE = 24_000;

function asScript<R, T>(s: ((req: R, index: number) => T | Promise<T>) | T): (req: R, index: number) => T | Promise<T> {
  return typeof s === 'function' ? (s as (req: R, index: number) => T | Promise<T>) : () => s;
}

export async function startSpeechServer(options: SpeechServerOptions = {}): Promise<SpeechServer> {
  let transcribe = asScript<TranscriptionRequest, TranscriptionReply>(options.transcribe ?? { text: '' });
  let speak = asScript<SpeechRequest, SpeechReply>(options.speak ?? {});
  let transcribeBase = 0;
  let speakBase = 0;
  const transcriptions: TranscriptionRequest[] = [];
  const speeches: SpeechRequest[] = [];
  const sockets = new Set<Duplex>();
  const inFlight = { transcriptions: 0, speeches: 0 };
  const peak = { transcriptions: 0, speeches: 0 };

  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    const kind = path === '/v1/audio/transcriptions' ? 'transcriptions' : path === '/v1/audio/speech' ? 'speeches' : undefined;
    if (kind) {
      peak[kind] = Math.max(peak[kind], ++inFlight[kind]);
      res.once('close', () => inFlight[kind]--);
    }
    handle(req, res).catch(() => {
      if (!res.headersSent) sendError(res, 500, 'stand-in failure');
      else res.destroy();
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const aborted = abortedPromise(req, res);
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'POST') return sendError(res, 405, 'method not allowed');
    if (!/^Bearer \S+/.test(req.headers.authorization ?? '')) return sendError(res, 401, 'Incorrect API key provided');
    const body = await readBody(req, MAX_UPLOAD);
    if (body === undefined) return sendError(res, 413, 'payload too large');
    if (path === '/v1/audio/transcriptions') {
      const parsed = parseMultipart(req.headers['content-type'] ?? '', body);
      if (!parsed) return sendError(res, 400, 'expected multipart/form-data');
      const file = parsed.files.get('file');
      const wav = file?.data ?? Buffer.alloc(0);
      const check = checkWav(wav);
      const record: TranscriptionRequest = {
        fields: Object.fromEntries(parsed.fields),
        model: parsed.fields.get('model') ?? '',
        language: parsed.fields.get('language'),
        wav,
        fileName: file?.fileName ?? '',
        fileType: file?.contentType ?? '',
        wavProblem: file ? check.problem : 'no file part',
        samples: check.samples,
        headers: req.headers,
        aborted,
      };
      transcriptions.push(record);
      if (!record.model) return sendError(res, 400, 'you must provide a model parameter');
      if (record.wavProblem) return sendError(res, 400, `Invalid file format: ${record.wavProblem}`);
      const reply = await transcribe(record, transcriptions.length - 1 - transcribeBase);
      if (!(await applyFault(reply, res, aborted))) return;
      const text = reply.text ?? '';
      if (record.fields['response_format'] === 'text') {
        res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(text);
      } else {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ text }));
      }
      return;
    }
    if (path === '/v1/audio/speech') {
      let json: Record<string, unknown>;
      try {
        json = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
      } catch {
        return sendError(res, 400, 'invalid JSON body');
      }
      const record: SpeechRequest = {
        body: json,
        model: typeof json['model'] === 'string' ? json['model'] : '',
        input: typeof json['input'] === 'string' ? json['input'] : '',
        voice: typeof json['voice'] === 'string' ? json['voice'] : '',
        responseFormat: typeof json['response_format'] === 'string' ? json['response_format'] : 'mp3',
        headers: req.headers,
        aborted,
        complete: () => res.writableFinished,
      };
      speeches.push(record);
      if (!record.model || !record.input || !record.voice) return sendError(res, 400, 'model, input and voice are required');
      if (record.responseFormat !== 'pcm' && record.responseFormat !== 'wav') {
        return sendError(res, 400, `the stand-in speaks pcm and wav, not ${record.responseFormat}`);
      }
      const reply = await speak(record, speeches.length - 1 - speakBase);
      if (!(await applyFault(reply, res, aborted))) return;
      const pcm = reply.pcm ?? speechPcm(record.input);
      const data = Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength);
      const payload = record.responseFormat === 'wav' ? Buffer.concat([streamingWavHeader(STAND_IN_TTS_RATE), data]) : data;
      res.writeHead(200, { 'content-type': record.responseFormat === 'wav' ? 'audio/wav' : 'audio/pcm' });
      await streamChunks(payload, reply, res, aborted);
      return;
    }
    sendError(res, 404, `no route ${path}`);
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    transcriptions,
    speeches,
    onTranscribe(s) {
      transcribe = asScript(s);
      transcribeBase = transcriptions.length;
    },
    onSpeak(s) {
      speak = asScript(s);
      speakBase = speeches.length;
    },
    openConnections: () => sockets.size,
    inFlight,
    peak,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

// ---------------------------------------------------------------------------------------------------------
// Edge read-aloud stand-in

export interface EdgeTtsRequest {
  /** The upgrade's query parameters (TrustedClientToken, ConnectionId, Sec-MS-GEC, Sec-MS-GEC-Version). */
  query: Record<string, string>;
  headers: IncomingMessage['headers'];
  outputFormat: string;
  ssml: string;
  /** The voice name and the (unescaped) text inside the SSML. */
  voice: string;
  text: string;
  requestId: string;
  /** Resolves when the client closed the socket before `turn.end`. */
  aborted: Promise<void>;
}

export interface EdgeTtsReply extends Omit<SpeechReply, 'status' | 'error'> {
  /** Close the socket with this WebSocket code instead of answering (the service drops a bad request so). */
  closeCode?: number;
}

export type EdgeTtsScript = (req: EdgeTtsRequest, index: number) => EdgeTtsReply | Promise<EdgeTtsReply>;

export interface EdgeTtsServer {
  /** The `wss://…/edge/v1` equivalent: `ws://127.0.0.1:<port>/consumer/speech/synthesize/readaloud/edge/v1`. */
  url: string;
  requests: EdgeTtsRequest[];
  /** Upgrades refused (bad token or Sec-MS-GEC). */
  refused: number;
  onSpeak(script: EdgeTtsScript | EdgeTtsReply): void;
  openConnections(): number;
  close(): Promise<void>;
}

export const EDGE_PATH = '/consumer/speech/synthesize/readaloud/edge/v1';
export const EDGE_TRUSTED_CLIENT_TOKEN = '6A5AA1D4EAFF4E9FB37E23D68491D6F4';

/** Sec-MS-GEC as the service checks it: SHA-256 of the 5-minute Windows-epoch tick and the token, upper hex. */
export function edgeSecMsGec(nowMs: number): string {
  const seconds = Math.floor(nowMs / 1000) + 11_644_473_600;
  const ticks = BigInt(seconds - (seconds % 300)) * 10_000_000n;
  return createHash('sha256').update(`${ticks}${EDGE_TRUSTED_CLIENT_TOKEN}`, 'ascii').digest('hex').toUpperCase();
}

export async function startEdgeTtsServer(options: { speak?: EdgeTtsScript | EdgeTtsReply } = {}): Promise<EdgeTtsServer> {
  let speak = asScript<EdgeTtsRequest, EdgeTtsReply>(options.speak ?? {});
  let base = 0;
  const requests: EdgeTtsRequest[] = [];
  const sockets = new Set<Duplex>();
  const http = createServer((_req, res) => sendError(res, 404, 'websocket only'));
  http.on('connection', (s) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  const wss = new WebSocketServer({ noServer: true, maxPayload: 1 << 20 });
  const state = { refused: 0 };

  http.on('upgrade', (req, socket, head) => {
    const url = new URL(req.url ?? '/', 'http://stand-in');
    const query = Object.fromEntries(url.searchParams);
    const now = Date.now();
    const gecOk = [now, now - 300_000].some((t) => edgeSecMsGec(t) === query['Sec-MS-GEC']);
    if (url.pathname !== EDGE_PATH || query['TrustedClientToken'] !== EDGE_TRUSTED_CLIENT_TOKEN || !gecOk || !query['ConnectionId']) {
      state.refused++;
      socket.end('HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => serve(ws, req, query));
  });

  function serve(ws: WebSocket, req: IncomingMessage, query: Record<string, string>): void {
    let outputFormat = '';
    let closed = false;
    let resolveAborted: () => void = () => {};
    const aborted = new Promise<void>((r) => (resolveAborted = r));
    let finished = false;
    ws.on('close', () => {
      closed = true;
      if (!finished) resolveAborted();
    });
    ws.on('message', (data: RawData, isBinary: boolean) => {
      if (isBinary) return ws.close(1003, 'unexpected binary');
      const { headers, body } = parseEdgeText(rawToString(data));
      if (headers['Path'] === 'speech.config') {
        try {
          const cfg = JSON.parse(body) as { context?: { synthesis?: { audio?: { outputFormat?: string } } } };
          outputFormat = cfg.context?.synthesis?.audio?.outputFormat ?? '';
        } catch {
          ws.close(1007, 'bad speech.config');
        }
        return;
      }
      if (headers['Path'] !== 'ssml') return ws.close(1007, 'unexpected path');
      const requestId = headers['X-RequestId'] ?? '';
      const voice = /<voice name='([^']*)'>/.exec(body)?.[1] ?? '';
      const text = unescapeXml(/<prosody[^>]*>([\s\S]*)<\/prosody>/.exec(body)?.[1] ?? '');
      const record: EdgeTtsRequest = { query, headers: req.headers, outputFormat, ssml: body, voice, text, requestId, aborted };
      requests.push(record);
      void (async () => {
        const reply = await speak(record, requests.length - 1 - base);
        if (reply.hold) await reply.hold;
        if (reply.delayMs) await sleep(reply.delayMs);
        if (closed) return;
        if (reply.hang) return;
        if (reply.closeCode !== undefined) return ws.close(reply.closeCode, 'stand-in failure');
        const mp3 = /^audio-24khz-\d+kbitrate-mono-mp3$/.test(outputFormat);
        const pcm = /^raw-24khz-16bit-mono-pcm$/.test(outputFormat);
        if (!mp3 && !pcm) return ws.close(1007, 'unsupported output format');
        const samples = reply.pcm ?? speechPcm(text);
        const audio = mp3 ? await encodeMp3Cached(samples, reply.pcm ? undefined : text) : Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength);
        const mime = mp3 ? 'audio/mpeg' : 'audio/x-wav';
        const ts = new Date().toISOString();
        ws.send(edgeText(requestId, 'turn.start', ts, '{"context":{"serviceTag":"stand-in"}}'));
        ws.send(edgeText(requestId, 'response', ts, '{"context":{"serviceTag":"stand-in"},"audio":{"type":"inline"}}'));
        const chunk = reply.chunkBytes ?? 4800;
        let sent = 0;
        for (let off = 0; off < audio.length; off += chunk) {
          if (closed) return;
          if (reply.failAfterChunks !== undefined && sent >= reply.failAfterChunks) return ws.terminate();
          ws.send(edgeAudioFrame(requestId, mime, audio.subarray(off, off + chunk)));
          sent++;
          if (reply.chunkDelayMs) await sleep(reply.chunkDelayMs);
        }
        ws.send(edgeText(requestId, 'audio.metadata', ts, '{"Metadata":[]}'));
        finished = true;
        ws.send(edgeText(requestId, 'turn.end', ts, '{}'));
      })().catch(() => ws.terminate());
    });
  }

  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}${EDGE_PATH}`,
    requests,
    get refused() {
      return state.refused;
    },
    onSpeak(s) {
      speak = asScript(s);
      base = requests.length;
    },
    openConnections: () => sockets.size,
    close: () =>
      new Promise<void>((resolve) => {
        for (const c of wss.clients) c.terminate();
        for (const s of sockets) s.destroy();
        wss.close();
        http.close(() => resolve());
      }),
  };
}

function edgeText(requestId: string, path: string, ts: string, body: string): string {
  return `X-RequestId:${requestId}\r\nContent-Type:application/json; charset=utf-8\r\nX-Timestamp:${ts}\r\nPath:${path}\r\n\r\n${body}`;
}

function edgeAudioFrame(requestId: string, mime: string, audio: Buffer): Buffer {
  const header = Buffer.from(`X-RequestId:${requestId}\r\nContent-Type:${mime}\r\nX-StreamId:stand-in\r\nPath:audio\r\n`, 'ascii');
  const len = Buffer.alloc(2);
  len.writeUInt16BE(header.length);
  return Buffer.concat([len, header, audio]);
}

function parseEdgeText(text: string): { headers: Record<string, string>; body: string } {
  const split = text.indexOf('\r\n\r\n');
  const head = split < 0 ? text : text.slice(0, split);
  const headers: Record<string, string> = {};
  for (const line of head.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon)] = line.slice(colon + 1).trim();
  }
  return { headers, body: split < 0 ? '' : text.slice(split + 4) };
}

function unescapeXml(s: string): string {
  return s
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&amp;/g, '&');
}

function rawToString(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data as ArrayBuffer).toString('utf8');
}

/** lamejs is slow (pure JS): the default speech of a text is encoded once per process. */
const mp3Cache = new Map<string, Buffer>();
async function encodeMp3Cached(pcm: Int16Array, text: string | undefined): Promise<Buffer> {
  if (text === undefined) return encodeMp3(pcm);
  const hit = mp3Cache.get(text);
  if (hit) return hit;
  const mp3 = await encodeMp3(pcm);
  if (mp3Cache.size >= 64) mp3Cache.clear();
  mp3Cache.set(text, mp3);
  return mp3;
}

async function encodeMp3(pcm: Int16Array): Promise<Buffer> {
  const { Mp3Encoder } = await import('@breezystack/lamejs');
  const enc = new Mp3Encoder(1, STAND_IN_TTS_RATE, 48);
  const parts: Buffer[] = [];
  // lamejs hands out Int8Arrays: view their bytes.
  const bytes = (a: ArrayBufferView): Buffer => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  for (let off = 0; off < pcm.length; off += 1152) parts.push(bytes(enc.encodeBuffer(pcm.subarray(off, off + 1152))));
  parts.push(bytes(enc.flush()));
  return Buffer.concat(parts);
}

// ---------------------------------------------------------------------------------------------------------
// Audio for tests

/**
 * Deterministic speech-like audio at `sampleRate` (default 24 kHz): ~60 ms per character (at least 200 ms,
 * at most 8 s), a 180 Hz voiced tone with harmonics and a syllable-rate envelope. Not zeros, cheap.
 */
export function speechPcm(text: string, sampleRate = STAND_IN_TTS_RATE): Int16Array {
  const seconds = Math.min(8, Math.max(0.2, text.length * 0.06));
  const out = new Int16Array(Math.round(seconds * sampleRate));
  for (let i = 0; i < out.length; i++) {
    const t = i / sampleRate;
    const envelope = 0.55 + 0.45 * Math.sin(2 * Math.PI * 4 * t);
    const voiced = Math.sin(2 * Math.PI * 180 * t) + 0.5 * Math.sin(2 * Math.PI * 360 * t) + 0.25 * Math.sin(2 * Math.PI * 720 * t);
    out[i] = Math.round(6000 * envelope * voiced);
  }
  return out;
}

/** Real speech: espeak-ng's WAV (22050 Hz, 16-bit, mono) for `text`, from /usr/bin/espeak-ng. */
export function espeakWav(text: string, opts: { voice?: string; wordsPerMinute?: number } = {}): Promise<Buffer> {
  const args = ['--stdout', '-v', opts.voice ?? 'en-us', '-s', String(opts.wordsPerMinute ?? 160), text];
  return new Promise((resolve, reject) => {
    execFile('espeak-ng', args, { encoding: 'buffer', maxBuffer: 32 * 1024 * 1024, timeout: 20_000 }, (err, stdout) => {
      if (err) reject(err);
      else resolve(stdout);
    });
  });
}

// ---------------------------------------------------------------------------------------------------------
// HTTP helpers

function sendError(res: ServerResponse, status: number, message: string): void {
  if (res.headersSent) return void res.destroy();
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: { message, type: 'invalid_request_error', param: null, code: null } }));
}

function abortedPromise(req: IncomingMessage, res: ServerResponse): Promise<void> {
  return new Promise<void>((resolve) => {
    res.once('close', () => {
      if (!res.writableFinished) resolve();
    });
    req.once('aborted', () => resolve());
  });
}

/** Apply delay/hold/hang/status; false when the reply was an error or the client is gone. */
async function applyFault(reply: StandInFault, res: ServerResponse, aborted: Promise<void>): Promise<boolean> {
  let gone = false;
  void aborted.then(() => (gone = true));
  if (reply.hang) {
    await aborted;
    return false;
  }
  if (reply.hold) await Promise.race([reply.hold, aborted]);
  if (reply.delayMs) await Promise.race([sleep(reply.delayMs), aborted]);
  if (gone) return false;
  if (reply.status !== undefined && reply.status >= 400) {
    sendError(res, reply.status, reply.error ?? 'stand-in failure');
    return false;
  }
  return true;
}

async function streamChunks(payload: Buffer, reply: SpeechReply, res: ServerResponse, aborted: Promise<void>): Promise<void> {
  let gone = false;
  void aborted.then(() => (gone = true));
  const chunk = reply.chunkBytes ?? 4800;
  let sent = 0;
  for (let off = 0; off < payload.length; off += chunk) {
    if (gone) return;
    if (reply.failAfterChunks !== undefined && sent >= reply.failAfterChunks) return void res.destroy();
    if (!res.write(payload.subarray(off, off + chunk))) await Promise.race([new Promise((r) => res.once('drain', r)), aborted]);
    sent++;
    if (reply.chunkDelayMs) await Promise.race([sleep(reply.chunkDelayMs), aborted]);
  }
  if (!gone) res.end();
}

function readBody(req: IncomingMessage, limit: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        resolve(undefined);
        req.destroy();
        return;
      }
      parts.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(parts)));
    req.on('error', reject);
  });
}

interface MultipartFile {
  data: Buffer;
  fileName: string;
  contentType: string;
}

/** A strict multipart/form-data parser (RFC 7578): text fields and file parts by name. */
function parseMultipart(contentType: string, body: Buffer): { fields: Map<string, string>; files: Map<string, MultipartFile> } | undefined {
  const m = /^multipart\/form-data;.*boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  const boundary = m?.[1] ?? m?.[2];
  if (!boundary) return undefined;
  const delimiter = Buffer.from(`--${boundary}`);
  const fields = new Map<string, string>();
  const files = new Map<string, MultipartFile>();
  let pos = body.indexOf(delimiter);
  if (pos < 0) return undefined;
  for (;;) {
    pos += delimiter.length;
    if (body.subarray(pos, pos + 2).toString() === '--') break;
    if (body.subarray(pos, pos + 2).toString() !== '\r\n') return undefined;
    pos += 2;
    const headEnd = body.indexOf('\r\n\r\n', pos);
    if (headEnd < 0) return undefined;
    const head = body.subarray(pos, headEnd).toString('utf8');
    const next = body.indexOf(Buffer.concat([Buffer.from('\r\n'), delimiter]), headEnd + 4);
    if (next < 0) return undefined;
    const data = body.subarray(headEnd + 4, next);
    const name = /content-disposition:[^\r\n]*\bname="([^"]*)"/i.exec(head)?.[1];
    const fileName = /content-disposition:[^\r\n]*\bfilename="([^"]*)"/i.exec(head)?.[1];
    const type = /content-type:\s*([^\r\n]+)/i.exec(head)?.[1] ?? '';
    if (name === undefined) return undefined;
    if (fileName !== undefined) files.set(name, { data: Buffer.from(data), fileName, contentType: type.trim() });
    else fields.set(name, data.toString('utf8'));
    pos = next + 2;
  }
  return { fields, files };
}

/** Checks a WAV is 16 kHz, 16-bit, mono PCM with exact RIFF and data sizes; independent of the code under test. */
function checkWav(wav: Buffer): { problem: string; samples: Int16Array } {
  const none = new Int16Array(0);
  if (wav.length < 44) return { problem: 'shorter than a WAV header', samples: none };
  if (wav.toString('ascii', 0, 4) !== 'RIFF' || wav.toString('ascii', 8, 12) !== 'WAVE') return { problem: 'not RIFF/WAVE', samples: none };
  if (wav.readUInt32LE(4) !== wav.length - 8) return { problem: `RIFF size ${wav.readUInt32LE(4)} ≠ ${wav.length - 8}`, samples: none };
  if (wav.toString('ascii', 12, 16) !== 'fmt ' || wav.readUInt32LE(16) !== 16) return { problem: 'no 16-byte fmt chunk first', samples: none };
  const format = wav.readUInt16LE(20);
  const channels = wav.readUInt16LE(22);
  const rate = wav.readUInt32LE(24);
  const byteRate = wav.readUInt32LE(28);
  const align = wav.readUInt16LE(32);
  const bits = wav.readUInt16LE(34);
  if (format !== 1 || channels !== 1 || rate !== 16_000 || bits !== 16 || byteRate !== 32_000 || align !== 2) {
    return { problem: `format ${format} ch ${channels} rate ${rate} bits ${bits} byteRate ${byteRate} align ${align}`, samples: none };
  }
  if (wav.toString('ascii', 36, 40) !== 'data') return { problem: 'no data chunk after fmt', samples: none };
  const size = wav.readUInt32LE(40);
  if (size !== wav.length - 44 || size % 2 !== 0) return { problem: `data size ${size} ≠ ${wav.length - 44}`, samples: none };
  const samples = new Int16Array(size / 2);
  for (let i = 0; i < samples.length; i++) samples[i] = wav.readInt16LE(44 + i * 2);
  return { problem: '', samples };
}

/** The header OpenAI streams before WAV audio of unknown length: RIFF and data sizes 0xFFFFFFFF. */
function streamingWavHeader(rate: number): Buffer {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'ascii');
  h.writeUInt32LE(0xffffffff, 4);
  h.write('WAVE', 8, 'ascii');
  h.write('fmt ', 12, 'ascii');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 2, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36, 'ascii');
  h.writeUInt32LE(0xffffffff, 40);
  return h;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
