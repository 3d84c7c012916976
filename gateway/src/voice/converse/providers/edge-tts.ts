/**
 * Microsoft Edge's free read-aloud voices (xiaozhi-esp32-server's default synthesiser; needs internet, no key),
 * over the WebSocket wire format Edge itself speaks — as the `edge-tts` Python package and its npm ports do:
 *
 *   wss://speech.platform.bing.com/consumer/speech/synthesize/readaloud/edge/v1
 *     ?TrustedClientToken=…&ConnectionId=<uuid>&Sec-MS-GEC=<token>&Sec-MS-GEC-Version=1-<edge version>
 *   → text `Path:speech.config` (JSON: the output format), text `Path:ssml` (the voice and the text)
 *   ← text `turn.start`, `response`, binary `Path:audio` (2-byte big-endian header length, headers, audio),
 *     `audio.metadata`, and `turn.end` when the sentence is done.
 *
 * Sec-MS-GEC is SHA-256 over the Windows file time rounded down to 5 minutes and the trusted client token.
 * The service serves only the formats Edge uses (MP3 and WebM; raw PCM is refused, and asking for it gets
 * clients blocked), so the audio comes as 24 kHz MP3 and is decoded here (mpg123-decoder, WebAssembly).
 */
import { createHash, randomUUID } from 'node:crypto';
import { MPEGDecoder } from 'mpg123-decoder';
import type { Logger } from 'pino';
import { WebSocket, type RawData } from 'ws';
import { ProviderError, type SpeechSynthesizer, type SynthesizeOptions } from '../contracts.js';
import { Resampler } from '../audio/resample.js';
import { deadline, safeText, toProviderError } from './errors.js';

export const EDGE_TTS_URL = 'wss://speech.platform.bing.com/consumer/speech/synthesize/readaloud/edge/v1';
const TRUSTED_CLIENT_TOKEN = '6A5AA1D4EAFF4E9FB37E23D68491D6F4';
const EDGE_VERSION = '130.0.2849.68';
const OUTPUT_FORMAT = 'audio-24khz-48kbitrate-mono-mp3';
const MP3_RATE = 24_000;
/** A sentence's MP3 bigger than this is cut off (48 kbit/s: ≈ 20 minutes). */
const MAX_BYTES = 8 * 1024 * 1024;
const MAX_TEXT = 4096;

export interface EdgeSynthesizerOptions {
  /** The endpoint (tests point it at a local stand-in). */
  url?: string | undefined;
  voice: string;
  sampleRate: number;
  /** Time to connect, to the first audio and between frames. */
  timeoutMs: number;
  log: Logger;
}

export function edgeSecMsGec(nowMs: number): string {
  const seconds = Math.floor(nowMs / 1000) + 11_644_473_600; // Unix → Windows epoch
  const ticks = BigInt(seconds - (seconds % 300)) * 10_000_000n;
  return createHash('sha256').update(`${ticks}${TRUSTED_CLIENT_TOKEN}`, 'ascii').digest('hex').toUpperCase();
}

/** "Microsoft Server Speech Text to Speech Voice (en-US, AriaNeural)" from "en-US-AriaNeural"; long names pass. */
export function edgeVoiceName(voice: string): string {
  const m = /^([a-z]{2,3}-[A-Za-z]{2,4}(?:-[A-Za-z]+)?)-([A-Za-z0-9]+Neural)$/.exec(voice);
  return m ? `Microsoft Server Speech Text to Speech Voice (${m[1]}, ${m[2]})` : voice;
}

function escapeXml(s: string): string {
  return s
    .replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, ' ')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;');
}

function timestamp(): string {
  const d = new Date();
  const days = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
  const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
  const p = (n: number): string => String(n).padStart(2, '0');
  return `${days[d.getUTCDay()]} ${months[d.getUTCMonth()]} ${p(d.getUTCDate())} ${d.getUTCFullYear()} ${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())} GMT+0000 (Coordinated Universal Time)`;
}

export class EdgeSynthesizer implements SpeechSynthesizer {
  readonly name = 'edge';
  readonly sampleRate: number;

  constructor(private readonly o: EdgeSynthesizerOptions) {
    this.sampleRate = o.sampleRate;
  }

  async *synthesize(text: string, opts: SynthesizeOptions): AsyncIterable<Int16Array> {
    const d = deadline(opts.signal, this.o.timeoutMs);
    const decoder = new MPEGDecoder();
    const resampler = this.sampleRate === MP3_RATE ? undefined : new Resampler(MP3_RATE, this.sampleRate);
    const query = new URLSearchParams({
      TrustedClientToken: TRUSTED_CLIENT_TOKEN,
      ConnectionId: randomUUID().replace(/-/g, ''),
      'Sec-MS-GEC': edgeSecMsGec(Date.now()),
      'Sec-MS-GEC-Version': `1-${EDGE_VERSION}`,
    });
    const ws = new WebSocket(`${this.o.url ?? EDGE_TTS_URL}?${query}`, {
      headers: {
        Pragma: 'no-cache',
        'Cache-Control': 'no-cache',
        Origin: 'chrome-extension://jdiccldimpdaibmpdkjnbmckianbfold',
        'User-Agent': `Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/${EDGE_VERSION.split('.')[0]}.0.0.0 Safari/537.36 Edg/${EDGE_VERSION}`,
        'Accept-Language': 'en-US,en;q=0.9',
      },
      maxPayload: 1 << 20,
      handshakeTimeout: this.o.timeoutMs,
    });
    const queue = new ChunkQueue();
    const fail = (e: ProviderError): void => queue.fail(e);
    d.signal.addEventListener('abort', () => fail(toProviderError(new Error('aborted'), this.name, 'speech', d)), { once: true });
    ws.on('unexpected-response', (_req, res) => fail(new ProviderError('http', `speech failed: HTTP ${res.statusCode ?? 0}`, this.name)));
    ws.on('error', (err) => fail(new ProviderError('network', `speech failed: ${safeText(err.message)}`, this.name)));
    ws.on('close', () => fail(new ProviderError('network', 'speech failed: the service closed the connection', this.name)));
    ws.on('open', () => {
      const requestId = randomUUID().replace(/-/g, '');
      const config = {
        context: { synthesis: { audio: { metadataoptions: { sentenceBoundaryEnabled: 'false', wordBoundaryEnabled: 'false' }, outputFormat: OUTPUT_FORMAT } } },
      };
      ws.send(`X-Timestamp:${timestamp()}\r\nContent-Type:application/json; charset=utf-8\r\nPath:speech.config\r\n\r\n${JSON.stringify(config)}\r\n`);
      const ssml =
        `<speak version='1.0' xmlns='http://www.w3.org/2001/10/synthesis' xml:lang='en-US'>` +
        `<voice name='${escapeXml(edgeVoiceName(opts.voice ?? this.o.voice))}'><prosody pitch='+0Hz' rate='+0%' volume='+0%'>` +
        `${escapeXml(text.slice(0, MAX_TEXT))}</prosody></voice></speak>`;
      ws.send(`X-RequestId:${requestId}\r\nContent-Type:application/ssml+xml\r\nX-Timestamp:${timestamp()}Z\r\nPath:ssml\r\n\r\n${ssml}`);
    });
    ws.on('message', (data: RawData, isBinary: boolean) => {
      d.touch();
      const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
      if (!isBinary) {
        if (/(^|\r\n)Path:turn\.end\r\n/.test(buf.toString('utf8', 0, Math.min(buf.length, 1024)))) queue.end();
        return;
      }
      if (buf.length < 2) return;
      const headerLen = buf.readUInt16BE(0);
      const header = buf.toString('utf8', 2, 2 + headerLen);
      if (!/(^|\r\n)Path:audio(\r\n|$)/.test(header)) return;
      queue.push(buf.subarray(2 + headerLen));
      if (queue.bytes > MAX_BYTES) fail(new ProviderError('too_long', 'speech longer than the limit', this.name));
    });
    try {
      await decoder.ready;
      for (;;) {
        const mp3 = await queue.next();
        if (!mp3) break;
        const decoded = decoder.decode(mp3);
        const ch = decoded.channelData[0];
        if (!ch || decoded.samplesDecoded === 0) continue;
        const pcm = floatToPcm(ch.subarray(0, decoded.samplesDecoded));
        const out = resampler ? resampler.push(pcm) : pcm;
        if (out.length) yield out;
      }
      const tail = resampler?.flush();
      if (tail?.length) yield tail;
    } catch (err) {
      const e = toProviderError(err, this.name, 'speech', d);
      if (e.code !== 'aborted') this.o.log.warn({ provider: this.name, code: e.code, err: e.message }, 'speech synthesis failed');
      throw e;
    } finally {
      d.clear();
      ws.removeAllListeners('close');
      ws.on('error', () => {});
      if (ws.readyState === WebSocket.OPEN) ws.close(1000);
      else ws.terminate();
      decoder.free();
    }
  }
}

function floatToPcm(f: Float32Array): Int16Array {
  const out = new Int16Array(f.length);
  for (let i = 0; i < f.length; i++) {
    const v = Math.round((f[i] ?? 0) * 32767);
    out[i] = v > 32767 ? 32767 : v < -32768 ? -32768 : v;
  }
  return out;
}

/** Audio frames from socket events to an async loop; ends or fails once. */
class ChunkQueue {
  bytes = 0;
  private items: Buffer[] = [];
  private done = false;
  private error: ProviderError | undefined;
  private wake: (() => void) | undefined;

  push(b: Buffer): void {
    if (this.done) return;
    this.items.push(b);
    this.bytes += b.length;
    this.wake?.();
  }

  end(): void {
    this.done = true;
    this.wake?.();
  }

  fail(e: ProviderError): void {
    if (this.done) return;
    this.error = e;
    this.done = true;
    this.wake?.();
  }

  async next(): Promise<Buffer | undefined> {
    for (;;) {
      if (this.error) throw this.error;
      const item = this.items.shift();
      if (item) return item;
      if (this.done) return undefined;
      await new Promise<void>((r) => (this.wake = r));
      this.wake = undefined;
    }
  }
}
