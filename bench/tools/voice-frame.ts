/**
 * The voice relay's own per-frame JavaScript for a WebSocket device, in one process: a frame up
 * (`VoiceModeRouter.onAudio` → `VoiceRelay.onAudio` → the voice server's socket) and one down (the voice server's
 * message → the device), against what the bare relay does per frame (one `send` each way). The sockets' `send` are
 * stubbed on both sides, so the figures are the relay's checks, lookups, counters and allocations alone.
 *   node --conditions=voxgate-source --import tsx --max-semi-space-size=64 bench/tools/voice-frame.ts [relay module]
 * CPU time per frame (process.cpuUsage, lower of three runs) and heap bytes allocated per frame (heapUsed growth
 * over a run without a garbage collection; "gc" when one ran). `relay module`: another copy of voice/relay.ts to
 * measure (e.g. main's, for a before/after).
 */
import { PerformanceObserver } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import pino from 'pino';
import { Registry } from 'prom-client';
import type { WebSocket } from 'ws';
import type { VoiceDevice, VoiceHook } from '../../gateway/src/devices/voice-hook.js';
import { VoiceSlice } from '../../gateway/src/voice/config.js';
import { VoiceModeRouter } from '../../gateway/src/voice/dispatch.js';
import { createVoiceMetrics } from '../../gateway/src/voice/metrics.js';
import type { VoiceRelay as Relay } from '../../gateway/src/voice/relay.js';
import { VoiceServerDouble } from '../../test/support/voice-server.js';
import { ROOT } from '../lib/procs.js';

const modulePath = process.argv[2] ?? 'gateway/src/voice/relay.ts';
const { VoiceRelay } = (await import(pathToFileURL(ROOT + modulePath).href)) as { VoiceRelay: typeof Relay };
const N = 50_000;
const server = await VoiceServerDouble.start({ recordAudio: false });
const config = VoiceSlice.parse({ mode: 'relay', upstream: { url: server.url } });
const relay = new VoiceRelay({ config, log: pino({ level: 'silent' }), metrics: createVoiceMetrics(new Registry()) });
const sink = { frames: 0 };
const device = {
  deviceId: '02:00:00:00:00:01',
  clientId: 'bench',
  sessionId: '',
  state: 'ready',
  transport: 'websocket',
  remoteAddress: '127.0.0.1',
  send: () => true,
  sendBinary: () => (sink.frames++, true),
  bufferedBytes: () => 0,
  close: () => undefined,
} as unknown as VoiceDevice;
const router = new VoiceModeRouter({ modeOf: () => 'relay', relay, off: relay as VoiceHook });
if (!(await router.onHello(device, { type: 'hello', version: 1, transport: 'websocket' } as never))) throw new Error('no voice session');
const vs = (relay as unknown as { sessions: Map<VoiceDevice, { upstream: WebSocket }> }).sessions.get(device)!;
// The voice server's socket stays open (its state and buffered amount are read as usual); its send does nothing.
vs.upstream.send = (() => sink.frames++) as WebSocket['send'];
const fromUpstream = (relay as unknown as { fromUpstream(vs: unknown, data: Buffer, isBinary: boolean): void }).fromUpstream.bind(relay);
const frame = Buffer.alloc(160, 7);
const bareUp = { send: (_d: Buffer, _o: { binary: boolean }) => sink.frames++ };
const bareDevice = { send: (_d: Buffer, _o: { binary: boolean }) => sink.frames++ };

let gcs = 0;
new PerformanceObserver((l) => (gcs += l.getEntries().length)).observe({ entryTypes: ['gc'] });
const measure = (name: string, op: () => void) => {
  for (let i = 0; i < 20_000; i++) op(); // JIT
  const runs = [0, 1, 2].map(() => {
    const g0 = gcs;
    const h0 = process.memoryUsage().heapUsed;
    const c0 = process.cpuUsage();
    for (let i = 0; i < N; i++) op();
    const c = process.cpuUsage(c0);
    const h = process.memoryUsage().heapUsed - h0;
    return { us: ((c.user + c.system) * 1000) / N, bytes: gcs === g0 ? (h / N).toFixed(1) : 'gc' };
  });
  const best = runs.reduce((a, b) => (b.us < a.us ? b : a));
  console.log(
    `${name.padEnd(34)} ${best.us.toFixed(1).padStart(6)} ns/frame  ${String(best.bytes).padStart(6)} B/frame (runs: ${runs.map((r) => r.bytes).join(', ')})`,
  );
};
console.log(`relay module: ${modulePath}`);
for (let round = 0; round < 2; round++) {
  measure('gateway: up (router → relay → ws)', () => router.onAudio(device, frame));
  measure('bare relay: up', () => bareUp.send(frame, { binary: true }));
  measure('gateway: down (ws → relay → device)', () => fromUpstream(vs, frame, true));
  measure('bare relay: down', () => bareDevice.send(frame, { binary: true }));
}
relay.close();
await server.close();
process.exit(0);
