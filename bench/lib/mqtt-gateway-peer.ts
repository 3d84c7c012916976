/**
 * The peer for the MQTT+UDP voice rows: 78/xiaozhi-mqtt-gateway, the Node relay xiaozhi users deploy in front of
 * their voice server. It is on no package registry, so the bench takes a checkout the user made
 * (`--mqtt-gateway-peer <dir>` or VOXGATE_BENCH_MQTT_GATEWAY: the repository with `npm install` run in it) and never
 * fetches, builds or commits it. The checkout is copied into the run's data dir, because the peer reads its
 * configuration from `config/mqtt.json` beside its own `app.js`; the copy gets a configuration naming the voice
 * server double and otherwise the peer's defaults (debug off, no signature key: its documented development setup).
 */
import { fork, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createSocket } from 'node:dgram';
import { connect } from 'node:net';
import { basename, join, relative, resolve } from 'node:path';
import { PEER_PROBE_IMPORT } from '../procs/ipc.js';
import { Proc, freePort } from './procs.js';

export const MQTT_GATEWAY_PEER_ENV = 'VOXGATE_BENCH_MQTT_GATEWAY';
/** What the bench needs from a checkout: the peer's entry, its MQTT parser, its config helper and its one socket library. */
const NEEDED = ['app.js', 'mqtt-protocol.js', 'utils/config-manager.js', 'node_modules/ws/package.json'];

/** The checkout the command line or the environment names, or why there is none (a note for the run's log). */
export function mqttGatewayPeerDir(option: string | undefined): { dir?: string; note?: string } {
  const given = option ?? process.env[MQTT_GATEWAY_PEER_ENV];
  if (!given)
    return {
      note:
        `the peer 78/xiaozhi-mqtt-gateway is not in these rows: it is on no package registry; clone it and run npm install in it, ` +
        `then pass --mqtt-gateway-peer <dir> (or ${MQTT_GATEWAY_PEER_ENV}=<dir>)`,
    };
  const dir = resolve(given);
  const missing = NEEDED.filter((f) => !existsSync(join(dir, f)));
  if (missing.length > 0) return { note: `the peer checkout ${dir} lacks ${missing.join(', ')} (clone 78/xiaozhi-mqtt-gateway and run npm install in it)` };
  return { dir };
}

export interface StartedPeer {
  proc: Proc;
  /** `mqtt://127.0.0.1:<port>` */
  url: string;
  /** The checkout's commit, when it is a git checkout. */
  commit?: string;
}

/**
 * The peer relaying to `upstreamUrl`, from a copy of `dir` in `runDir`, once its MQTT port accepts connections. `probeImport`:
 * the bench's probe in its process (default: the memory probe; the heap tool passes its snapshot probe).
 */
export async function startMqttGatewayPeer(dir: string, upstreamUrl: string, runDir: string, probeImport = PEER_PROBE_IMPORT): Promise<StartedPeer> {
  const copy = join(runDir, basename(dir));
  mkdirSync(copy, { recursive: true });
  cpSync(dir, copy, { recursive: true, filter: (src) => !['.git', 'config', '.env'].includes(relative(dir, src)) });
  mkdirSync(join(copy, 'config'), { recursive: true });
  writeFileSync(join(copy, 'config', 'mqtt.json'), JSON.stringify({ production: { chat_servers: [upstreamUrl] }, debug: false }, null, 2));
  const [mqttPort, udpPort] = [await freePort(), await freeUdpPort()];
  const env: Record<string, string | undefined> = { ...process.env, MQTT_PORT: String(mqttPort), UDP_PORT: String(udpPort), PUBLIC_IP: '127.0.0.1' };
  delete env['MQTT_SIGNATURE_KEY'];
  const child = fork(join(copy, 'app.js'), [], {
    cwd: copy,
    execArgv: ['--expose-gc', '--import', probeImport],
    env,
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    serialization: 'json',
  });
  const proc = new Proc('mqtt-gateway-peer', child);
  const end = Date.now() + 30_000;
  while (!(await accepts(mqttPort))) {
    if (child.exitCode !== null || Date.now() > end) {
      await proc.stop();
      throw new Error(`the peer did not listen on ${mqttPort}: ${proc.stderr.slice(-5).join(' | ')}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const git = spawnSync('git', ['-C', dir, 'rev-parse', 'HEAD'], { encoding: 'utf8' });
  return { proc, url: `mqtt://127.0.0.1:${mqttPort}`, ...(git.status === 0 ? { commit: git.stdout.trim() } : {}) };
}

/**
 * The username a device of the peer presents: its three-part client id (`GID@@@mac@@@uuid`, the one the bench's
 * devices use) makes it read the username as base64 JSON, as the xiaozhi OTA server issues it.
 */
export const PEER_MQTT_USERNAME = Buffer.from(JSON.stringify({ ip: '127.0.0.1' })).toString('base64');

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

function freeUdpPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createSocket('udp4');
    s.once('error', reject);
    s.bind(0, '127.0.0.1', () => {
      const port = s.address().port;
      s.close(() => resolve(port));
    });
  });
}
