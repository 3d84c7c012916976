/**
 * Process CPU per operation of the hot-path pieces issue 21 changed, old way against new, in one process:
 *   npx tsx --conditions voxgate-source bench/tools/micro.ts
 * CPU time (process.cpuUsage), not wall clock, so the figures hold on a busy shared machine. Each pair is run
 * twice, alternating, and the lower of each is kept. No assertion: figures for docs/performance.md.
 */
import type { Socket } from 'node:net';
import { Duplex, PassThrough, type Readable, Transform, type TransformCallback, Writable } from 'node:stream';
import {
  CallToolResultSchema,
  DeviceFrameSchema,
  RpcResultSchema,
  UdpCrypter,
  classifyRpc,
  envelopeFits,
  safeEqual,
  newUdpSessionKeys,
  normalizeDeviceContent,
  normalizeDeviceId,
  openUdpPacket,
  sealUdpPacket,
} from '@voxgate/protocol';
import fastJsonStringify from 'fast-json-stringify';
import { Counter, Histogram, Registry } from 'prom-client';
import { lazyChildLogger } from '../../gateway/src/api/request-logger.js';
import { authenticate, principalOf } from '../../gateway/src/api/auth.js';
import { plainTextResult } from '../../gateway/src/devices/tool-call.js';
import { plainCallResultJson } from '../../gateway/src/api/call-result-json.js';
import { CallResult, jsonSchema } from '../../gateway/src/api/schemas.js';
import { createLogger } from '../../gateway/src/log.js';
import { bindCounter, bindHistogram } from '../../gateway/src/metrics-bound.js';
import { DeadlineTimer } from '../../gateway/src/devices/deadline-timer.js';
import { GuardedMqttConnection } from '../../gateway/src/links/mqtt-connection.js';
import { MqttPacketGuard } from '../../gateway/src/links/mqtt-packet-guard.js';

function cpuUsPerOp(n: number, op: (i: number) => void): number {
  for (let i = 0; i < Math.min(n, 5000); i++) op(i); // warm up (JIT)
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) op(i);
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / n;
}

function pair(name: string, n: number, before: (i: number) => void, after: (i: number) => void): void {
  const b = Math.min(cpuUsPerOp(n, before), cpuUsPerOp(n, before));
  const a = Math.min(cpuUsPerOp(n, after), cpuUsPerOp(n, after));
  process.stdout.write(`${name.padEnd(58)} before ${b.toFixed(3).padStart(7)} µs  after ${a.toFixed(3).padStart(7)} µs  (${(b / a).toFixed(1)}× less)\n`);
}

// AES-128-CTR of one 160-byte Opus frame, up (open) and down (seal).
const { key, nonce } = { key: Buffer.alloc(16, 7), nonce: newUdpSessionKeys(1234).nonce };
const opus = Buffer.alloc(160, 0x58);
const packet = sealUdpPacket(key, nonce, { timestamp: 60, sequence: 1 }, opus);
const crypter = new UdpCrypter(key);
const frame = Buffer.allocUnsafe(16 + 160);
pair(
  'UDP packet open (createCipheriv per packet -> UdpCrypter)',
  100_000,
  () => void openUdpPacket(key, packet),
  () => crypter.openInto(packet, frame, 16),
);
pair(
  'UDP packet seal (createCipheriv per packet -> UdpCrypter)',
  100_000,
  (i) => void sealUdpPacket(key, nonce, { timestamp: i, sequence: i }, opus),
  (i) => void crypter.seal(nonce, { timestamp: i, sequence: i }, opus),
);

// A labelled counter increment, as every relayed frame does four of.
const registry = new Registry();
const frames = new Counter({ name: 'f_total', help: 'f', labelNames: ['direction'] as const, registers: [registry] });
const bound = bindCounter(frames, { direction: 'up' });
pair(
  'counter increment (inc({labels}) -> bound child)',
  1_000_000,
  () => frames.inc({ direction: 'up' }),
  () => bound.inc(),
);

// A device's usual tools/call result.
const reply = JSON.parse('{"content":[{"type":"text","text":"true"}],"isError":false}') as unknown;
pair(
  'tools/call result check (zod -> plainTextResult)',
  200_000,
  () => {
    const r = CallToolResultSchema.safeParse(reply);
    if (r.success) normalizeDeviceContent(r.data.content);
  },
  () => void plainTextResult(reply),
);

// A request's logger (fastify makes one per request).
const sink = new Writable({ write: (_c, _e, cb) => cb() });
const log = createLogger('warn', sink).child({ component: 'http' });
pair(
  'request logger (pino child with redaction -> lazy)',
  200_000,
  (i) => void log.child({ reqId: `req-${i}` }, {}),
  (i) => void lazyChildLogger(log, { reqId: `req-${i}` }, {}),
);

// The API key check of every request.
const keys = ['bench-api-key-0123456789abcdef'];
const header = `Bearer ${keys[0]!}`;
const uncached = () => {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  const key = keys.find((k) => safeEqual(k, m![1]!));
  return { principal: principalOf(key!) };
};
pair(
  'API key check (SHA-256 per request -> once per key)',
  200_000,
  () => void uncached(),
  () => void authenticate(header, keys),
);
// The same check before the key bytes were kept (two Buffers per configured key per request).
const principals = new Map([[keys[0]!, principalOf(keys[0]!)]]);
const perRequestBuffers = () => {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  const key = keys.find((k) => safeEqual(k, m![1]!));
  return { principal: principals.get(key!) };
};
pair(
  'API key check (Buffers of every key per request -> kept bytes)',
  500_000,
  () => void perRequestBuffers(),
  () => void authenticate(header, keys),
);

// Every call's duration.
const durations = new Histogram({ name: 'd_seconds', help: 'd', buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60], registers: [] });
const boundDurations = bindHistogram(
  new Histogram({ name: 'b_seconds', help: 'd', buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60], registers: [] }),
);
pair(
  'call duration (histogram observe -> bound histogram)',
  1_000_000,
  (i) => durations.observe((i % 300) / 10_000),
  (i) => boundDurations.observe((i % 300) / 10_000),
);

// The call path's per-call pieces changed in the second pass (docs/performance.md, "call path, second pass").
const MAC_LOOSE = /^[0-9a-f]{2}([:_-]?)[0-9a-f]{2}(?:\1[0-9a-f]{2}){4}$/i;
const regexDeviceId = (input: string) => {
  const s = input.trim();
  if (s.length > 17 || !MAC_LOOSE.test(s)) return undefined;
  return s.replace(/[:_-]/g, '').toLowerCase().match(/../g)!.join(':');
};
pair(
  'device id from the path (3 regexes -> one pass when canonical)',
  500_000,
  () => void regexDeviceId('02:00:00:00:00:2a'),
  () => void normalizeDeviceId('02:00:00:00:00:2a'),
);

const reply2 = JSON.parse(
  '{"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":12345,"result":{"content":[{"type":"text","text":"true"}],"isError":false}}}',
) as { payload: Record<string, unknown> } & Record<string, never>;
pair(
  'device frame envelope (zod -> envelopeFits)',
  500_000,
  () => void DeviceFrameSchema.safeParse(reply2),
  () => void envelopeFits(reply2),
);
pair(
  'JSON-RPC reply classification (zod -> type checks)',
  500_000,
  () => void RpcResultSchema.safeParse(reply2.payload),
  () => void classifyRpc(reply2.payload),
);

const serializeCallResult = fastJsonStringify(jsonSchema(CallResult, 'output') as never);
const outcome = { content: [{ type: 'text' as const, text: 'true' }], durationMs: 1.23 };
pair(
  'call result to JSON (spread + response schema -> plainCallResultJson)',
  500_000,
  () => void serializeCallResult({ ...outcome, isError: false }),
  () => void plainCallResultJson(outcome),
);

// A call's deadline: a timer per call (its own duration, so Node makes and drops a timer list each time) against
// the session's one DeadlineTimer, armed once for the earliest deadline and left running.
const noop = () => undefined;
const deadlines = new DeadlineTimer({ expireDue: () => Infinity });
pair(
  'call deadline (setTimeout + clearTimeout -> DeadlineTimer.arm)',
  500_000,
  () => clearTimeout(setTimeout(() => noop(), 30_000)),
  () => deadlines.arm(Date.now() + 30_000),
);
deadlines.stop();

/** The guard as it was, a Transform around `pass`. */
class GuardTransform extends Transform {
  constructor(private readonly guard: MqttPacketGuard) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    const passed = this.guard.pass(chunk);
    if (passed instanceof Error) return cb(passed);
    cb(null, passed);
  }
}

/** The MQTT connection's read side as it was: the socket piped into the guard, the guard's output pushed on. */
class PipedGuardConnection extends Duplex {
  constructor(private readonly guarded: Readable) {
    super();
    guarded.on('data', (chunk: Buffer) => {
      if (!this.push(chunk)) guarded.pause();
    });
  }
  override _read(): void {
    this.guarded.resume();
  }
}

/** CPU µs per device reply (a 120-byte QoS 0 PUBLISH) from the socket stand-in to the broker's read. */
async function mqttReadUs(piped: boolean, n: number): Promise<number> {
  const socket = new PassThrough();
  const guard = new MqttPacketGuard(65_536);
  const conn = piped ? new PipedGuardConnection(socket.pipe(new GuardTransform(guard))) : new GuardedMqttConnection(socket as unknown as Socket, guard);
  let got = 0;
  // As aedes reads: on 'readable', everything buffered.
  conn.on('readable', () => {
    for (let b = conn.read() as Buffer | null; b !== null; b = conn.read() as Buffer | null) got += b.length;
  });
  const payload = Buffer.from(`{"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"true"}]}}}`);
  const topic = Buffer.from('\u0000\u000ddevice-server');
  const publish = Buffer.concat([Buffer.from([0x30, topic.length + payload.length]), topic, payload]);
  const batch = async (count: number) => {
    for (let i = 0; i < count; i++) {
      socket.write(publish);
      // One device reply per socket read, as at concurrency 1: let the stream machinery run in between.
      if (i % 16 === 15) await new Promise((r) => setImmediate(r));
    }
    await new Promise((r) => setImmediate(r));
  };
  await batch(5000);
  const c0 = process.cpuUsage();
  await batch(n);
  const c = process.cpuUsage(c0);
  if (got < publish.length * n) throw new Error(`mqtt read: ${got} bytes`);
  conn.destroy();
  return (c.user + c.system) / n;
}
const mqttBefore = Math.min(await mqttReadUs(true, 100_000), await mqttReadUs(true, 100_000));
const mqttAfter = Math.min(await mqttReadUs(false, 100_000), await mqttReadUs(false, 100_000));
process.stdout.write(
  `${'MQTT read (socket piped through the guard -> guard.pass)'.padEnd(58)} before ${mqttBefore.toFixed(3).padStart(7)} µs  after ${mqttAfter.toFixed(3).padStart(7)} µs  (${(mqttBefore / mqttAfter).toFixed(1)}× less)\n`,
);
