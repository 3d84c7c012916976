/** The bench's run: its mode and sizes from the command line, the rows measured so far, its log. */
import { join, resolve } from 'node:path';
import { ROOT } from '../lib/procs.js';

export type Mode = 'full' | 'quick' | 'tiny';

export interface Result {
  name: string;
  value: number;
  unit: string;
  floor: number | null;
  ratio: number | null;
  params: Record<string, unknown>;
}

export const API_KEY = 'bench-api-key-0123456789abcdef';
export const TOOL = 'self.audio_speaker.set_volume';
export const BODY = JSON.stringify({ arguments: { volume: 42 } });
export const CALL_DEVICES = [1, 100];
export const CONCURRENCY = [1, 16, 64];
export const CALL_AMOUNT_TINY = 100;
/** The gateway lets 64 callers wait on one device (default 16) so concurrency 64 over 1 device queues, not 429s. */
export const QUEUE_LIMIT = 128;
export const SOURCES_BASE = 2; // 127.0.0.2, .3, ...
/** How long a gateway may take to start: from TypeScript sources (tsx) on a shared, loaded machine this took over 30 s. */
export const GATEWAY_START_MS = 120_000;

const SETTINGS = {
  full: { callS: 10, warmS: 2, fleetN: 100_000, soakS: 600, soakRate: 1000, stormCalls: 1000 },
  quick: { callS: 1.5, warmS: 0.3, fleetN: 10_000, soakS: 4, soakRate: 500, stormCalls: 200 },
  tiny: { callS: 0, warmS: 0, fleetN: 20, soakS: 2, soakRate: 50, stormCalls: 20 },
};
/**
 * Relayed audio: `devices` voice sessions at the real frame rate for `seconds`, then `satDevices` sessions with
 * `satWindow` frames in flight each (a new frame per echo) for `satSeconds`. Quick mode's paced rows (no goal reads
 * them: CPU per frame at the real rate, loss, memory per session) run 3 s a side, ~5 000 frames, since the night of 2026-11-27 (4 s
 * before), and its soak 4 s (6 before): with the one-device rows' pipelined floor left to full runs (call-path.ts),
 * ~15 s less for the quick bench's five minutes, which days slower than the ones they were tuned on passed.
 */
const VOICE = {
  full: { devices: 500, seconds: 20, satDevices: 10, satWindow: 8, satSeconds: 10 },
  quick: { devices: 100, seconds: 3, satDevices: 10, satWindow: 8, satSeconds: 3 },
  tiny: { devices: 4, seconds: 0.6, satDevices: 2, satWindow: 4, satSeconds: 0.3 },
};
/** Cluster: devices held by the owning instance (calls rotate over all of them). */
const CLUSTER_DEVICES = { full: 5000, quick: 1000, tiny: 20 };

export interface Bench {
  mode: Mode;
  settings: (typeof SETTINGS)[Mode];
  voice: (typeof VOICE)[Mode];
  clusterDevices: number;
  /** The scenarios to run (--only). */
  only: ReadonlySet<string>;
  /** --profile: the gateways under --cpu-prof (the WebSocket call path unless --only names others). */
  profile: boolean;
  outFile: string;
  /** --mqtt-gateway-peer <dir>: a checkout of 78/xiaozhi-mqtt-gateway for the MQTT+UDP voice rows (bench/lib/mqtt-gateway-peer.ts). */
  mqttGatewayPeer: string | undefined;
  results: Result[];
  log(s: string): void;
}

/** The run the command line asks for (see bench/run.ts for the options). */
export function benchFromArgs(argv: readonly string[]): Bench {
  const flag = (name: string) => argv.includes(`--${name}`);
  const option = (name: string) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const mode: Mode = flag('tiny') ? 'tiny' : flag('quick') ? 'quick' : 'full';
  const profile = flag('profile');
  const t0 = performance.now();
  return {
    mode,
    settings: SETTINGS[mode],
    voice: VOICE[mode],
    clusterDevices: CLUSTER_DEVICES[mode],
    only: new Set((option('only') ?? (profile ? 'ws' : 'ws,mqtt,fleet,storm,soak,voice,converse,mcp,cluster')).split(',')),
    profile,
    outFile: resolve(option('out') ?? join(ROOT, 'bench/results/latest.json')),
    mqttGatewayPeer: option('mqtt-gateway-peer'),
    results: [],
    log: (s) => process.stderr.write(`[bench ${((performance.now() - t0) / 1000).toFixed(1)}s] ${s}\n`),
  };
}
