/**
 * CPU per request of the call route's fixed pieces, this checkout's against another checkout's (the commit before a
 * change), in one process, alternating:
 *   MICRO_BASE=<dir> npx tsx --conditions voxgate-source bench/tools/call-pieces.ts [rounds=5]
 * <dir> holds the older sources, gateway/src and protocol/src (e.g. `git archive main | tar -x -C <dir>`, its node_modules a link to this one's).
 * Pieces: the API-key check, a device reply frame's parse, the MQTT packet guard's read of a device reply, and a whole request through fastify
 * (`inject`) with the gateway's set-up of the logger and the scope hook against the older one (inject's own ~100 µs
 * per request hide differences of a few µs: read its lowest figures). CPU time (process.cpuUsage), lowest and median
 * of the rounds; no assertion.
 */
import { pathToFileURL } from 'node:url';
import { Writable } from 'node:stream';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import * as auth from '../../gateway/src/api/auth.js';
import * as scope from '../../gateway/src/api/device-scope.js';
import * as requestLogger from '../../gateway/src/api/request-logger.js';
import * as guard from '../../gateway/src/links/mqtt-packet-guard.js';
import { createLogger } from '../../gateway/src/log.js';
import * as envelope from '../../protocol/src/envelope.js';

const baseDir = process.env['MICRO_BASE'];
if (!baseDir) throw new Error('set MICRO_BASE to the older checkout');
const rounds = Number(process.argv[2] ?? 5);
const older = async <T>(path: string) => (await import(pathToFileURL(`${baseDir}/gateway/src/${path}`).href)) as T;
const oldAuth = await older<typeof auth>('api/auth.ts');
const oldScope = await older<typeof scope>('api/device-scope.ts');
const oldLogger = await older<typeof requestLogger>('api/request-logger.ts');
const oldGuard = await older<typeof guard>('links/mqtt-packet-guard.ts');
const oldEnvelope = (await import(pathToFileURL(`${baseDir}/protocol/src/envelope.ts`).href)) as typeof envelope;

function cpuUs(n: number, op: (i: number) => void): number {
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) op(i);
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / n;
}
async function cpuUsAsync(n: number, op: (i: number) => Promise<unknown>): Promise<number> {
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) await op(i);
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / n;
}
const low = (xs: number[]) => Math.min(...xs);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
function report(name: string, before: number[], after: number[]): void {
  const f = (xs: number[]) => `${low(xs).toFixed(3)} / ${median(xs).toFixed(3)}`;
  process.stdout.write(`${name.padEnd(52)} before ${f(before)} µs  after ${f(after)} µs  (lowest / median of ${rounds})\n`);
}
async function pair(name: string, n: number, before: (i: number) => unknown, after: (i: number) => unknown): Promise<void> {
  const b: number[] = [];
  const a: number[] = [];
  const run = async (op: (i: number) => unknown) => {
    const probe = op(0);
    return probe instanceof Promise ? cpuUsAsync(n, op as (i: number) => Promise<unknown>) : cpuUs(n, op as (i: number) => void);
  };
  await run(before);
  await run(after); // warm up both (JIT)
  for (let k = 0; k < rounds; k++) {
    b.push(await run(before));
    a.push(await run(after));
  }
  report(name, b, a);
}

// The API key of every request.
const keys = ['bench-api-key-0123456789abcdef'];
const header = `Bearer ${keys[0]!}`;
await pair(
  'API key check',
  300_000,
  () => oldAuth.authenticate(header, keys),
  () => auth.authenticate(header, keys),
);

// A device's reply frame read at the parse boundary (bounds, JSON.parse, envelope).
const replyFrame = '{"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":123,"result":{"content":[{"type":"text","text":"true"}],"isError":false}}}';
await pair(
  'device reply frame parse (bounds, JSON, envelope)',
  500_000,
  () => oldEnvelope.parseDeviceFrame(replyFrame),
  () => envelope.parseDeviceFrame(replyFrame),
);

// A device reply's packet through the MQTT packet guard (one socket chunk, one whole QoS 0 PUBLISH).
const payload = Buffer.from(`{"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"true"}]}}}`);
const topic = Buffer.from('\u0000\u000ddevice-server');
const publish = Buffer.concat([Buffer.from([0x30, topic.length + payload.length]), topic, payload]);
const oldG = new oldGuard.MqttPacketGuard(65_536);
const newG = new guard.MqttPacketGuard(65_536);
await pair(
  'MQTT packet guard, one device reply',
  500_000,
  () => oldG.pass(publish),
  () => newG.pass(publish),
);

// A whole request through fastify, the gateway's logger set-up and scope hook against the older ones (the route
// itself answers at once). Each app authenticates as the gateway does.
const sink = new Writable({ write: (_c, _e, cb) => cb() });
const log = createLogger('warn', sink).child({ component: 'http' }) as FastifyBaseLogger;
const tenancy = { tenantOf: () => undefined };
async function app(newer: boolean): Promise<FastifyInstance> {
  const a = newer
    ? Fastify({ logController: new LogController({ disableRequestLogging: true }), childLoggerFactory: requestLogger.requestLoggers(log) })
    : Fastify({ loggerInstance: log, logController: new LogController({ disableRequestLogging: true }), childLoggerFactory: oldLogger.lazyChildLogger });
  if (newer) a.log = log;
  await a.register(async (v1) => {
    (newer ? auth : oldAuth).requireApiKey(v1, () => keys);
    (newer ? scope : oldScope).scopeDeviceRoutes(v1, tenancy);
    v1.post('/v1/devices/:deviceId/tools/:toolName/call', { config: { scopesItsDevice: true } }, (_req, reply) => {
      void reply.type('application/json; charset=utf-8').send('{"content":[{"type":"text","text":"true"}],"isError":false,"durationMs":1}');
    });
  });
  await a.ready();
  return a;
}
const [oldApp, newApp] = [await app(false), await app(true)];
const request = {
  method: 'POST' as const,
  url: '/v1/devices/02:00:00:00:00:01/tools/volume/call',
  headers: { authorization: header, 'content-type': 'application/json' },
  payload: '{"arguments":{"volume":42}}',
};
await pair(
  'request through fastify (logger set-up, hooks)',
  20_000,
  async () => await oldApp.inject(request),
  async () => await newApp.inject(request),
);
await oldApp.close();
await newApp.close();
