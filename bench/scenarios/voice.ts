import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { cpuUs, threadCpuUs, type ThreadCpu } from '../lib/cpu.js';
import { startGateway } from '../lib/compiled.js';
import { gatewayEnv, voiceRelayEnv } from '../lib/gateway-env.js';
import { ROOT, spawnTs, type Proc } from '../lib/procs.js';
import { mqttGatewayPeerDir, PEER_MQTT_USERNAME, startMqttGatewayPeer, type StartedPeer } from '../lib/mqtt-gateway-peer.js';
import { mergeVoiceLoads, runVoiceLoad, type VoiceLoadOptions, type VoiceLoadResult } from '../lib/voice.js';
import { API_KEY, GATEWAY_START_MS, type Bench } from './bench.js';
import { alternating, count, mem, metric, ratio, residentRatio, round, until, type Mem } from './measure.js';
import { pushPeerIdleRow, pushPeerRows } from './voice-peer.js';

/**
 * Relayed audio: devices -> a gateway with voice.mode "relay" -> the voice server double (echo) -> back, against the
 * same devices through a bare byte relay (bench/floors/voice-relay.ts: the floor) and connected straight to the double
 * (direct), in the same run. Its own gateway process:
 * with the relay on, every WebSocket hello opens a voice session, which the call-path and fleet rows must not.
 */
export async function voiceScenarios(b: Bench, dataDir: string): Promise<void> {
  const voiceServer = spawnTs('voice-server', 'bench/floors/voice-server.ts');
  const upstreamUrl = (await voiceServer.hello)['url'] as string;
  const voiceDir = join(dataDir, 'voice');
  mkdirSync(voiceDir, { recursive: true });
  writeFileSync(join(voiceDir, 'config.json'), '{}');
  // --profile: the bare relay too, so the two profiles of a row can be compared sample for sample.
  const relay = spawnTs('voice-relay', 'bench/floors/voice-relay.ts', {
    env: { VOICE_UPSTREAM_URL: upstreamUrl },
    nodeArgs: b.profile ? ['--cpu-prof', '--cpu-prof-dir', join(ROOT, 'bench/results/prof/voice-relay')] : [],
  });
  const [{ proc: gateway, url: gwUrl, httpPort, mqttPort }, relayHello] = await Promise.all([
    startGateway('voice-gateway', {
      env: async (ports) => ({
        ...(await gatewayEnv({ dataDir: voiceDir, apiKey: API_KEY, configFile: join(voiceDir, 'config.json'), ...ports })).env,
        ...voiceRelayEnv(upstreamUrl),
      }),
      nodeArgs: b.profile ? ['--cpu-prof', '--cpu-prof-dir', join(ROOT, 'bench/results/prof/voice')] : [],
      readyMs: GATEWAY_START_MS,
    }),
    relay.hello,
  ]);
  b.log(`voice: gateway on ${gwUrl} and the bare relay (port ${String(relayHello['port'])}) relaying to ${upstreamUrl}`);
  const peer = await startPeer(b, upstreamUrl, voiceDir);
  const [gwIdle, relayIdle] = [await mem(gateway), await mem(relay)];
  if (peer) pushPeerIdleRow(b, gwIdle, await mem(peer.proc), peer);
  b.results.push({
    name: 'voice.idle_rss',
    value: gwIdle.rss,
    unit: 'B',
    floor: relayIdle.rss,
    ratio: ratio(relayIdle.rss, gwIdle.rss),
    params: { floorKind: 'bare voice relay (ws + bare MQTT + dgram)', heapUsed: gwIdle.heapUsed, floorHeapUsed: relayIdle.heapUsed, afterGc: true },
  });
  const runs = [
    { pace: 'paced' as const, devices: b.voice.devices, window: 1, seconds: b.voice.seconds },
    { pace: 'saturate' as const, devices: b.voice.satDevices, window: b.voice.satWindow, seconds: b.voice.satSeconds },
  ];
  let macGroup = 0;
  const relayTarget = { ws: `ws://127.0.0.1:${String(relayHello['port'])}/xiaozhi/v1/`, udp: `mqtt://127.0.0.1:${String(relayHello['mqttPort'])}` };
  // One run through a relay process: its CPU from the first frame to the last echo, and its memory with every
  // session open (after GC).
  const through = async (proc: Proc, o: VoiceLoadOptions) => {
    const m0 = await mem(proc);
    let m1 = m0;
    let c0 = NaN;
    let t0: ThreadCpu = { mainUser: NaN, mainSys: NaN, other: NaN };
    const load0 = loadavg()[0]!;
    const result = await runVoiceLoad({
      ...o,
      whenOpen: async () => {
        m1 = await mem(proc);
        c0 = cpuUs(proc.child.pid);
        t0 = threadCpuUs(proc.child.pid);
      },
    });
    const cpu = cpuUs(proc.child.pid) - c0;
    const t1 = threadCpuUs(proc.child.pid);
    const load: [number, number] = [round(load0, 2), round(loadavg()[0]!, 2)];
    // Where the CPU went: the main thread's user and system time, and the other threads' (GC helpers, compilers).
    const cpuSplit = { mainUser: t1.mainUser - t0.mainUser, mainSys: t1.mainSys - t0.mainSys, otherThreads: t1.other - t0.other };
    const live = (m: Mem) => m.heapUsed + m.external;
    return relayed(result, cpu, cpuSplit, { rss: (m1.rss - m0.rss) / o.devices, live: (live(m1) - live(m0)) / o.devices }, load);
  };
  // One slice on one side: the run, with devices of its own, then until that side has closed every session.
  const side = (proc: Proc, o: Omit<VoiceLoadOptions, 'macGroup'>, closed: () => Promise<boolean>, what: string) => async () => {
    const r = await through(proc, { ...o, macGroup: macGroup++ });
    await until(what, closed, 30_000, 50);
    return r;
  };
  const gwIdleAgain = async () => (await metric(gwUrl, 'voxgate_voice_sessions_active')) === 0;
  const relayIdleAgain = async () => (await count(relay)) === 0;
  const peerIdleAgain = async () => (peer ? (await count(peer.proc)) === 0 : true);
  // The peer is optional: a run of it that fails (it exited, a session did not close) leaves its rows out, not the run.
  let peerFailure: string | undefined;
  const optional = (run: () => Promise<Relayed>) => async (): Promise<Relayed | undefined> => {
    if (peerFailure !== undefined) return undefined;
    try {
      return await run();
    } catch (e) {
      peerFailure = e instanceof Error ? e.message : String(e);
      b.log(`voice: the peer 78/xiaozhi-mqtt-gateway's rows are left out: ${peerFailure}`);
      return undefined;
    }
  };
  try {
    for (const transport of ['ws', 'udp'] as const) {
      const label = transport === 'ws' ? 'websocket' : 'mqtt+udp';
      const gwTarget = transport === 'ws' ? `ws://127.0.0.1:${httpPort}/xiaozhi/v1/` : `mqtt://127.0.0.1:${mqttPort}`;
      // The gateway talks binary protocol 2 upstream for UDP devices: their direct run speaks it straight to the double.
      const version: 1 | 2 = transport === 'ws' ? 1 : 2;
      // The peer relays MQTT+UDP devices only; it initializes and lists each device's tools as the gateway does.
      const withPeer = peer !== undefined && transport === 'udp';
      const sides: Side[] = [
        { proc: gateway, o: { transport, url: gwTarget, version, expectMcp: true }, idle: gwIdleAgain, what: 'the voice sessions to end on the gateway' },
        {
          proc: relay,
          o: { transport, url: relayTarget[transport], version: 1, expectMcp: false },
          idle: relayIdleAgain,
          what: 'the voice sessions to end on the bare relay',
        },
        ...(withPeer
          ? [
              {
                proc: peer.proc,
                o: { transport, url: peer.url, version, expectMcp: true, mqttUsername: PEER_MQTT_USERNAME },
                idle: peerIdleAgain,
                what: 'the peer to close its sessions',
                optional: true,
              },
            ]
          : []),
      ];
      // Each side serves a few sessions of this transport first, unmeasured: its first ones compile the path's code
      // (~36 KB a session of the first hundred's memory on the gateway's MQTT+UDP path, bench/tools/voice-heap.ts).
      const sideOf = (x: Side, o: Omit<VoiceLoadOptions, 'macGroup' | keyof Side['o']>) => {
        const run = side(x.proc, { ...o, ...x.o }, x.idle, x.what);
        return x.optional ? optional(run) : run;
      };
      for (const x of sides) await sideOf(x, WARM_UP)();
      for (const r of runs) {
        const common = { devices: r.devices, pace: r.pace, window: r.window, seconds: r.seconds, connectTimeoutMs: 30_000, drainMs: 5_000 };
        const slices = VOICE_SLICES[b.mode];
        const part = { ...common, seconds: r.seconds / slices };
        const [gs, rls, ps] = await alternating(
          sides.map((x) => sideOf(x, part)),
          slices,
        );
        const [g, rl] = [mergeRelayed(gs as Relayed[]), mergeRelayed(rls as Relayed[])];
        const peerSlices = ps?.filter((x) => x !== undefined);
        if (withPeer && peerFailure === undefined && peerSlices?.length === slices) {
          const p = mergeRelayed(peerSlices);
          pushPeerRows(b, label, r, g, p, peer);
          b.log(
            `voice ${label} ${r.pace} n=${r.devices}: peer 78/xiaozhi-mqtt-gateway ${p.perSecond.toFixed(0)} frames/s p50 ${p.p50.toFixed(2)} ms ` +
              `${p.cpuUsPerFrame.toFixed(1)} µs/frame (${splitText(p.split)}), lost ${p.lost}, corrupt ${p.corrupt}, connect failures ${p.connectFailures}`,
          );
        }
        // The direct run is no row's floor (its rate and latency go in the params): half the seconds, for the quick
        // bench's five minutes.
        const f = await runVoiceLoad({ ...common, seconds: r.seconds / 2, transport: 'ws', url: upstreamUrl, version, macGroup: macGroup++, expectMcp: false });
        pushVoiceRows(b, transport, label, r, g, rl, f);
        b.log(
          `voice ${label} ${r.pace} n=${r.devices}: gateway ${g.perSecond.toFixed(0)} frames/s p50 ${g.p50.toFixed(2)} ms ${g.cpuUsPerFrame.toFixed(1)} µs/frame, ` +
            `bare relay ${rl.perSecond.toFixed(0)} frames/s p50 ${rl.p50.toFixed(2)} ms ${rl.cpuUsPerFrame.toFixed(1)} µs/frame, ` +
            `direct ${f.perSecond.toFixed(0)} frames/s p50 ${f.p50.toFixed(2)} ms; lost ${g.lost}/${rl.lost}/${f.lost}; load ${g.load.join('→')}; ` +
            `µs/frame main user+sys, other threads: gateway ${splitText(g.split)}, bare relay ${splitText(rl.split)}`,
        );
      }
    }
  } finally {
    await Promise.all([gateway.stop(), relay.stop(), voiceServer.stop(), peer?.proc.stop()]);
  }
}

/** The peer for the MQTT+UDP rows when a checkout was given and it starts; else a note in the log and none. */
async function startPeer(b: Bench, upstreamUrl: string, voiceDir: string): Promise<StartedPeer | undefined> {
  const { dir, note } = mqttGatewayPeerDir(b.mqttGatewayPeer);
  if (!dir) return void b.log(`voice: ${note ?? ''}`);
  try {
    const peer = await startMqttGatewayPeer(dir, upstreamUrl, voiceDir);
    b.log(`voice: the peer 78/xiaozhi-mqtt-gateway (${peer.commit ?? 'no git commit'}, from ${dir}) on ${peer.url}`);
    return peer;
  } catch (e) {
    b.log(`voice: the peer 78/xiaozhi-mqtt-gateway is not in these rows: ${(e as Error).message}`);
    return undefined;
  }
}

/**
 * The saturated rows measure each side in this many slices of their seconds, taken in mirrored order (gateway, bare
 * relay, bare relay, gateway), as the call rows do (bench/scenarios/call-path.ts, `CALL_SLICES`): taken once each, the
 * WebSocket row read 0.84–1.17 of its floor in the quick runs of one day while the row alone, alternating, was level
 * (docs/performance.md, "Quick bench, late afternoon of 2026-11-27"). The paced rows too, since 2026-11-28: taken
 * once each, the side that ran first read its round trip up to 2× the others' (the device simulator's and the process's
 * first UDP frames: the peer's p50 was 0.51–0.78 of the gateway's run first, 0.95 mirrored).
 */
const VOICE_SLICES: Record<Bench['mode'], number> = { full: 4, quick: 2, tiny: 1 };

/** The unmeasured sessions each side serves before a transport's rows. */
const WARM_UP = { devices: 10, pace: 'paced', window: 1, seconds: 0.3, connectTimeoutMs: 30_000, drainMs: 2_000 } as const;

/** One process a transport's rows measure: where its devices go, and how to know it has closed their sessions. */
interface Side {
  proc: Proc;
  o: Pick<VoiceLoadOptions, 'transport' | 'url' | 'version' | 'expectMcp' | 'mqttUsername'>;
  idle: () => Promise<boolean>;
  what: string;
  /** A failure leaves this side's rows out (the peer), instead of failing the run. */
  optional?: boolean;
}

const splitText = (x: Relayed['split']) => `${x.mainUser}+${x.mainSys}, ${x.otherThreads}`;

interface CpuSplit {
  mainUser: number;
  mainSys: number;
  otherThreads: number;
}

export type Relayed = VoiceLoadResult & {
  /** µs of the relay process's CPU over the run, and per echo. */
  cpuUs: number;
  cpuUsPerFrame: number;
  cpuSplitUs: CpuSplit;
  /** The same split per echo, rounded (the rows' params). */
  split: CpuSplit;
  /** Resident memory per open session (after GC), and the JavaScript heap and external memory (Buffers) it holds. */
  rssPerSession: number;
  livePerSession: number;
  load: [number, number];
};

function relayed(r: VoiceLoadResult, cpuUs: number, cpuSplitUs: CpuSplit, perSession: { rss: number; live: number }, load: [number, number]): Relayed {
  const perFrame = (us: number) => (r.received > 0 ? us / r.received : NaN);
  const split = {
    mainUser: round(perFrame(cpuSplitUs.mainUser)),
    mainSys: round(perFrame(cpuSplitUs.mainSys)),
    otherThreads: round(perFrame(cpuSplitUs.otherThreads)),
  };
  return { ...r, cpuUs, cpuUsPerFrame: perFrame(cpuUs), cpuSplitUs, split, rssPerSession: perSession.rss, livePerSession: perSession.live, load };
}

/** One side's slices as one run: frames, seconds and CPU summed, per-echo figures over the sums. */
function mergeRelayed(slices: readonly Relayed[]): Relayed {
  if (slices.length === 1) return slices[0]!;
  const sum = (f: (x: Relayed) => number) => slices.reduce((n, x) => n + f(x), 0);
  const cpuSplitUs = {
    mainUser: sum((x) => x.cpuSplitUs.mainUser),
    mainSys: sum((x) => x.cpuSplitUs.mainSys),
    otherThreads: sum((x) => x.cpuSplitUs.otherThreads),
  };
  return relayed(
    mergeVoiceLoads(slices),
    sum((x) => x.cpuUs),
    cpuSplitUs,
    // A process's first slice grows its memory for the sessions; a later one reuses what the first left (RSS is not
    // given back at once), so the resident figure is the first slice's. The live figure (heap and Buffers) holds in any.
    { rss: slices[0]!.rssPerSession, live: sum((x) => x.livePerSession) / slices.length },
    [slices[0]!.load[0], slices[slices.length - 1]!.load[1]],
  );
}

function pushVoiceRows(
  b: Bench,
  transport: 'ws' | 'udp',
  label: string,
  r: { pace: string; devices: number; window: number; seconds: number },
  g: Relayed,
  rl: Relayed,
  f: VoiceLoadResult,
): void {
  const errs = (x: VoiceLoadResult) => x.lost + x.corrupt + x.connectFailures;
  const base = {
    transport: label,
    pace: r.pace,
    devices: r.devices,
    ...(r.pace === 'saturate' ? { window: r.window } : { frameMs: 60 }),
    floorPath:
      transport === 'ws'
        ? 'device -> bare relay (WebSocket in, WebSocket out) -> voice server'
        : 'device -> bare relay (MQTT hello; UDP + AES-128-CTR in, WebSocket protocol 2 out) -> voice server',
    directPath:
      transport === 'ws' ? 'device -> voice server, WebSocket, protocol 1' : 'device -> voice server, WebSocket, protocol 2 (a UDP device has no direct path)',
    errors: errs(g),
    floorErrors: errs(rl) + errs(f),
    load: g.load,
    floorLoad: rl.load,
  };
  const name = `voice_${transport}`;
  b.results.push({
    name: `${name}.frames_per_s`,
    value: round(g.perSecond),
    unit: 'frames/s',
    floor: round(rl.perSecond),
    ratio: ratio(g.perSecond, rl.perSecond),
    params: {
      ...base,
      seconds: round(g.seconds, 2),
      frames: g.received,
      floorFrames: rl.received,
      sent: g.sent,
      lost: g.lost,
      corrupt: g.corrupt,
      floorLost: rl.lost,
      directPerS: round(f.perSecond),
      directRatio: ratio(g.perSecond, f.perSecond),
      directFrames: f.received,
    },
  });
  b.results.push({
    name: `${name}.cpu_us_per_frame`,
    value: round(g.cpuUsPerFrame),
    unit: 'µs',
    floor: round(rl.cpuUsPerFrame),
    ratio: ratio(rl.cpuUsPerFrame, g.cpuUsPerFrame),
    params: { ...base, split: g.split, floorSplit: rl.split },
  });
  b.results.push({
    name: `${name}.rtt_p50_ms`,
    value: round(g.p50, 3),
    unit: 'ms',
    floor: round(rl.p50, 3),
    ratio: ratio(rl.p50, g.p50),
    params: { ...base, addedMs: round(g.p50 - rl.p50, 3), directP50: round(f.p50, 3) },
  });
  b.results.push({
    name: `${name}.rtt_p99_ms`,
    value: round(g.p99, 3),
    unit: 'ms',
    floor: round(rl.p99, 3),
    ratio: ratio(rl.p99, g.p99),
    params: { ...base, addedMs: round(g.p99 - rl.p99, 3), directP99: round(f.p99, 3) },
  });
  if (r.pace === 'paced') {
    const m = residentRatio(memOf(rl), memOf(g));
    b.results.push({
      name: `${name}.rss_per_session`,
      value: round(g.rssPerSession),
      unit: 'B',
      floor: round(rl.rssPerSession),
      ratio: m.ratio,
      params: {
        ...base,
        afterGc: true,
        livePerSession: round(g.livePerSession),
        floorLivePerSession: round(rl.livePerSession),
        liveRatio: m.liveRatio,
        residentNote: m.note,
      },
    });
  }
}

/** One side's memory per open session, as residentRatio compares it. */
export const memOf = (x: Relayed) => ({ rss: x.rssPerSession, live: x.livePerSession });
