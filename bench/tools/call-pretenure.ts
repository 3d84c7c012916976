/**
 * Can V8's allocation-site pretenuring make the device channel keep every call's objects across young collections?
 * One process per side, the RpcChannel of this checkout and, with CALLPRETENURE_BASE=<dir>, of an older one (e.g.
 * `git archive` of main), alternating; no sockets:
 *   node --conditions=voxgate-source --import tsx bench/tools/call-pretenure.ts [calls=20000] [rounds=2]
 * Each side's process runs with its young generation at its largest from the start (`--min-semi-space-size=16`, so a
 * pretenuring decision may be "tenure" at once) and `--trace-gc-nvp`. A fleet's setup burst first: 150 devices'
 * channels each send a request that stays pending across a young collection, so whatever the channel allocates per
 * request is ~100 % alive there, as when a fleet dials in. Then `calls` calls at concurrency 64 over those channels
 * (`requestFor`, as a tool call's job makes them), each through an object of the caller's holding a ~3 KB graph (a
 * tool call's job holds its route's callbacks, and through them its HTTP request and response), answered in a later
 * macrotask. Printed per side: bytes promoted per young collection during the calls. What is
 * promoted beyond the 64 calls in flight is what the channel's per-request objects kept after their call ended.
 */
import { spawn } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import type * as channelOf from '../../gateway/src/devices/rpc-channel.js';
import type * as badInputOf from '../../gateway/src/devices/bad-input-log.js';
import type * as metricsOf from '../../gateway/src/metrics.js';
import { describeGc, gcWindowOf } from '../lib/gc-nvp.js';
import { ROOT } from '../lib/procs.js';

const [calls = 20_000, rounds = 2] = process.argv.slice(2, 4).map(Number);
const child = process.argv[4] === '--child' ? process.argv[5] : undefined;

if (child !== undefined) await runChild(child);
else {
  const sides: Array<[string, string]> = [['this checkout', ROOT]];
  if (process.env['CALLPRETENURE_BASE']) sides.push(['base', process.env['CALLPRETENURE_BASE']]);
  for (let r = 0; r < rounds; r++)
    for (const [name, dir] of sides) {
      const args = ['--expose-gc', '--min-semi-space-size=16', '--max-semi-space-size=16', '--trace-gc-nvp'];
      const p = spawn(process.execPath, [...args, '--conditions=voxgate-source', '--import', 'tsx', process.argv[1]!, String(calls), '1', '--child', dir], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      p.stdout.on('data', (d: Buffer) => (out += d.toString()));
      await new Promise((ok) => p.once('close', ok));
      const lines = out.split('\n');
      const from = lines.indexOf('CALLS');
      const to = lines.indexOf('END');
      console.log(`${name.padEnd(14)} ${describeGc(gcWindowOf(lines.slice(from, to)), calls)}`);
    }
}

async function runChild(dir: string): Promise<void> {
  const src = (path: string) => import(pathToFileURL(`${dir}/gateway/src/${path}`).href);
  const channelModule = (await src('devices/rpc-channel.ts')) as typeof channelOf;
  const { RpcChannel } = channelModule;
  // The caller's object the channel is told the outcome through, holding what the caller holds (a tool call's job holds
  // its route's callbacks, and through them the HTTP request and response): made with `new`, so the only allocation
  // site on the way is the channel's own. An older channel takes any object with resolve/reject (PendingRequest absent).
  const Base = (channelModule.PendingRequest ?? class {}) as unknown as new () => object;
  class Caller extends Base {
    constructor(
      readonly mine: { items: unknown[]; note: string },
      readonly then: () => void,
    ) {
      super();
    }
    resolve(): void {
      if (this.mine.items.length !== 40) throw new Error('unreachable');
      this.then();
    }
    reject(e: unknown): void {
      throw e;
    }
  }
  const { createMetrics } = (await src('metrics.ts')) as typeof metricsOf;
  const { BadInputLog } = (await src('devices/bad-input-log.ts')) as typeof badInputOf;
  const { pino } = await import('pino');
  const log = pino({ level: 'silent' });
  const metrics = createMetrics();
  const sent: number[] = [];
  const channels = Array.from(
    { length: 150 },
    (_, i) =>
      new RpcChannel({
        deviceId: `dev-${i}`,
        sessionId: 's',
        send: (t: string) => (sent.push(Number(/"id":(\d+)/.exec(t)![1])), true),
        isClosed: () => false,
        log,
        metrics,
        badInput: new BadInputLog(log),
      }),
  );
  const answer = (c: (typeof channels)[number]) => c.onResult(sent.shift()!, { content: [] });
  // Warm the request path (V8 gives a function its allocation sites after a few runs), then the setup burst.
  for (let i = 0; i < 10; i++) void channels[0]!.request('ping', undefined, 60_000);
  for (let i = 0; i < 10; i++) answer(channels[0]!);
  await new Promise((r) => setImmediate(r));
  const burst = channels.map((c) => c.request('initialize', {}, 60_000));
  globalThis.gc!({ type: 'minor' } as never);
  globalThis.gc!({ type: 'minor' } as never);
  channels.forEach(answer);
  await Promise.all(burst);
  globalThis.gc!();
  process.stdout.write('CALLS\n');
  let started = 0;
  await new Promise<void>((done) => {
    let finished = 0;
    const one = (): void => {
      const c = channels[started++ % channels.length]!;
      // What the caller holds while its call runs: ~3 KB of its own objects.
      const mine = { items: Array.from({ length: 40 }, (_, k) => ({ k, text: `item ${k}` })), note: 'x'.repeat(200) + String(started) };
      const caller = new Caller(mine, () => {
        if (++finished === calls) return done();
        if (started < calls) one();
      });
      c.requestFor(caller as never, 'tools/call', { name: 't', arguments: {} }, 60_000);
      const id = sent.shift()!;
      setImmediate(() => c.onResult(id, { content: [] }));
    };
    for (let i = 0; i < 64; i++) one();
  });
  process.stdout.write('END\n');
}
