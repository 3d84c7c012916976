/**
 * What an open MQTT+UDP voice session holds in the relaying process, by constructor: the compiled gateway (voice.mode
 * "relay") and, given a checkout, the peer 78/xiaozhi-mqtt-gateway (bench/lib/mqtt-gateway-peer.ts), the same devices and
 * voice server double as the bench's voice rows. Heap bytes do not depend on the machine's load.
 *   node --conditions=voxgate-source --import tsx bench/tools/voice-heap.ts [sessions=200] [top=30] [--ws] [--peer=<dir>]
 * Build the gateway first (npx tsc -b tsconfig.build.json). Each process serves a warm-up run of 10 sessions (opened and
 * closed), is snapshotted after GC, then `sessions` sessions are opened and it is snapshotted again with them all open;
 * printed: process.memoryUsage() per session between the two, and the snapshots' difference per session (self size and
 * count by constructor, then by holder). `--ws`: WebSocket devices on the gateway instead (the peer takes MQTT only).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { forkCompiledWithProbe } from '../lib/compiled.js';
import { gatewayEnv, voiceRelayEnv } from '../lib/gateway-env.js';
import { byConstructor, printHeapDiff } from '../lib/heap-snapshot.js';
import { PEER_MQTT_USERNAME, startMqttGatewayPeer } from '../lib/mqtt-gateway-peer.js';
import { spawnTs, stopAll, type Proc, type Reply } from '../lib/procs.js';
import { runVoiceLoad, type VoiceLoadOptions } from '../lib/voice.js';
import { PROBE_JS } from './heap-probe.js';

const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const N = Number(args[0] ?? 200);
const TOP = Number(args[1] ?? 30);
const ws = process.argv.includes('--ws');
const peerDir = process.argv.find((a) => a.startsWith('--peer='))?.slice('--peer='.length);
const dir = mkdtempSync(join(tmpdir(), 'voxgate-voice-heap-'));
const probeImport = `data:text/javascript,${encodeURIComponent(PROBE_JS)}`;

type Mem = NodeJS.MemoryUsage;

async function measure(name: string, proc: Proc, o: Omit<VoiceLoadOptions, 'devices' | 'macGroup' | 'whenOpen'>): Promise<void> {
  const snap = async (tag: string) => {
    await new Promise((r) => setTimeout(r, 1000)); // closed sessions' sockets and timers settle
    const file = join(dir, `${name.replace(/[^a-z0-9]+/gi, '-')}-${tag}.heapsnapshot`);
    const r = await proc.request<Reply & { mem: Mem }>({ cmd: 'snapshot', file }, 300_000);
    return { file, mem: r.mem };
  };
  const run = (devices: number, macGroup: number, whenOpen?: () => Promise<void>) =>
    runVoiceLoad({ ...o, devices, macGroup, ...(whenOpen ? { whenOpen } : {}) });
  await run(10, 1);
  const a = await snap('a');
  let b: Awaited<ReturnType<typeof snap>> | undefined;
  const r = await run(N, 2, async () => {
    b = await snap('b');
  });
  if (!b || r.connectFailures > 0) throw new Error(`${name}: ${r.connectFailures} of ${N} sessions did not open`);
  const per = (x: number, y: number) => ((y - x) / N).toFixed(0).padStart(7);
  process.stdout.write(`\n${name}: ${N} open voice sessions (after 10 warm-up ones), per session, after GC:\n`);
  process.stdout.write(
    `  rss ${per(a.mem.rss, b.mem.rss)} B  heapUsed ${per(a.mem.heapUsed, b.mem.heapUsed)} B  external ${per(a.mem.external, b.mem.external)} B\n`,
  );
  printHeapDiff(byConstructor(a.file), byConstructor(b.file), N, TOP, 'session');
}

try {
  const voiceServer = spawnTs('voice-server', 'bench/floors/voice-server.ts');
  const upstreamUrl = (await voiceServer.hello)['url'] as string;
  writeFileSync(join(dir, 'config.json'), '{}');
  const base = await gatewayEnv({ dataDir: dir, apiKey: 'bench-key-0123456789abcdef', configFile: join(dir, 'config.json') });
  const gateway = forkCompiledWithProbe(
    'gateway',
    {
      ...base.env,
      ...voiceRelayEnv(upstreamUrl),
    },
    PROBE_JS,
  );
  for (let t = Date.now(); ;) {
    if ((await fetch(`http://127.0.0.1:${base.httpPort}/readyz`).catch(() => undefined))?.status === 200) break;
    if (Date.now() - t > 120_000) throw new Error('gateway did not start');
    await new Promise((r) => setTimeout(r, 200));
  }
  const common = { pace: 'paced' as const, window: 1, seconds: 0.3, connectTimeoutMs: 30_000, drainMs: 2_000, expectMcp: true };
  await measure(
    ws ? 'gateway, WebSocket devices' : 'gateway, MQTT+UDP devices',
    gateway,
    ws
      ? { ...common, transport: 'ws', url: `ws://127.0.0.1:${base.httpPort}/xiaozhi/v1/`, version: 1 }
      : { ...common, transport: 'udp', url: `mqtt://127.0.0.1:${base.mqttPort}`, version: 2 },
  );
  if (peerDir) {
    const peer = await startMqttGatewayPeer(peerDir, upstreamUrl, dir, probeImport);
    await measure(`peer 78/xiaozhi-mqtt-gateway ${peer.commit?.slice(0, 7) ?? ''}`, peer.proc, {
      ...common,
      transport: 'udp',
      url: peer.url,
      version: 2,
      mqttUsername: PEER_MQTT_USERNAME,
    });
  }
} finally {
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
}
