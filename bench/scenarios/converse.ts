import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { encoderFrameCosts, measureAudioCost } from '../../gateway/test/voice/converse/audio-bench.js';
import { startSpeechServer } from '../../gateway/test/support/speech-servers.js';
import { startLlmServer } from '../../test/support/llm-server.js';
import { ConversationDevice, spokenUtterance, type ListenMode, type TurnObservation, type Utterance } from '../lib/converse.js';
import { cpuUs } from '../lib/cpu.js';
import { startGateway } from '../lib/compiled.js';
import { gatewayEnv } from '../lib/gateway-env.js';
import { ROOT } from '../lib/procs.js';
import { API_KEY, GATEWAY_START_MS, type Bench } from './bench.js';
import { macOf, metric, ratio, round, until } from './measure.js';

/** Fixed delays of the stand-in providers, subtracted from what the device sees. */
const ASR_DELAY_MS = 100;
const TTS_DELAY_MS = 50;
const ANSWER = 'It is noon. Have a good day.';
const CONVERSE = {
  full: { turns: 20, concurrent: 100, audioS: 30 },
  quick: { turns: 4, concurrent: 100, audioS: 10 },
  tiny: { turns: 1, concurrent: 4, audioS: 1 },
};

interface ReplyTimings {
  asrMs?: number;
  asrStartMs?: number;
  llmFirstTokenMs?: number;
  firstSentenceMs?: number;
  firstAudioMs?: number;
}

/**
 * voice.mode "converse": devices talk to the gateway itself (real Opus speech from espeak-ng, Voxgate's own
 * codec and speech detector), with stand-in transcription, speech and model servers of fixed delay that
 * speak the real OpenAI wire formats. Rows: Voxgate's own latency from the end of speech to the first answer
 * frame (stand-in delays subtracted) and its parts; concurrent conversations at the real frame rate; CPU per
 * second of conversation against the Opus codec's own cost measured in this run.
 */
export async function converseScenarios(b: Bench, dataDir: string): Promise<void> {
  const s = CONVERSE[b.mode];
  const [speech, llm, utterance] = await Promise.all([startSpeechServer(), startLlmServer(), spokenUtterance('what time is it')]);
  speech.onTranscribe({ text: 'what time is it', delayMs: ASR_DELAY_MS });
  speech.onSpeak({ delayMs: TTS_DELAY_MS });
  llm.script(() => ({ text: ANSWER }));
  const dir = join(dataDir, 'converse');
  mkdirSync(dir, { recursive: true });
  process.env['VOXGATE_BENCH_LLM_KEY'] = 'bench-llm-key';
  const config = {
    assistant: {
      models: { bench: { provider: 'openai', baseUrl: `${llm.url}/v1`, model: 'bench', apiKeyEnv: 'VOXGATE_BENCH_LLM_KEY', maxRetries: 0 } },
      defaultModel: 'bench',
      maxConcurrentTurns: s.concurrent * 2,
      maxConcurrentTurnsPerTenant: s.concurrent * 2,
    },
    // The model services' gateway-wide bounds raised with the turns' (a conversing device holds up to two speech requests).
    modelRequests: Object.fromEntries(
      ['asr', 'tts', 'llm'].map((k) => [
        k,
        { maxConcurrent: s.concurrent * 4, maxConcurrentPerTenant: s.concurrent * 4, maxWaitingPerTenant: s.concurrent * 4 },
      ]),
    ),
    voice: {
      mode: 'converse',
      maxSessions: s.concurrent * 2,
      // To compare: VOXGATE_BENCH_OPUS_COMPLEXITY=0..10 (default: the gateway's, 5), VOXGATE_BENCH_OPUS_PROCESSES=0..n
      // (default: the gateway's, the cores less one), VOXGATE_BENCH_OPUS_ADAPTIVE=false.
      converse: benchEncoderSettings(),
      asr: { baseUrl: speech.url, apiKeyEnv: 'VOXGATE_BENCH_LLM_KEY' },
      tts: { baseUrl: speech.url, apiKeyEnv: 'VOXGATE_BENCH_LLM_KEY' },
    },
  };
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  const {
    proc: gateway,
    url: gwUrl,
    httpPort,
  } = await startGateway('converse-gateway', {
    nodeArgs: b.profile ? ['--cpu-prof', '--cpu-prof-dir', join(ROOT, 'bench/results/prof/converse')] : [],
    env: async (ports) => (await gatewayEnv({ dataDir: dir, apiKey: API_KEY, configFile: join(dir, 'config.json'), ...ports })).env,
    readyMs: GATEWAY_START_MS,
  });
  const wsUrl = `ws://127.0.0.1:${httpPort}/xiaozhi/v1/`;
  const replies = collectReplies(gwUrl);
  let group = 0x70;
  const devices: ConversationDevice[] = [];
  const open = async (n: number) => {
    const g = group++;
    const made = Array.from({ length: n }, (_, i) => new ConversationDevice(macOf(g, i)));
    devices.push(...made);
    for (let i = 0; i < made.length; i += 25) await Promise.all(made.slice(i, i + 25).map((d) => d.connect(wsUrl)));
    return made;
  };
  try {
    await replies.ready;
    // Latency: one device, turns one after another, in each listen mode (manual first: the headline row).
    const [one] = await open(1);
    for (const mode of ['manual', 'auto'] as const) await latencyRows(b, one!, utterance, s.turns, mode, replies);

    // Concurrency: N devices, one turn each, at the same time.
    const many = await open(s.concurrent);
    const load0 = loadavg()[0]!;
    const lateBefore = await lateFrames(gwUrl);
    const enc0 = await encoderCounters(gwUrl);
    await metric(gwUrl, 'voxgate_nodejs_eventloop_lag_max_seconds'); // a scrape resets the gateway's loop-delay histogram
    const benchLoop = monitorEventLoopDelay({ resolution: 10 });
    benchLoop.enable();
    const cpu0 = treeCpuUs(gateway.child.pid);
    const ticks = sampleTicks();
    // Opt-in: its scrapes reset the gateway's loop-delay histogram (the loop max below then covers the last 500 ms only).
    const pendingSeen = samplePending(gwUrl, process.env['VOXGATE_BENCH_CONVERSE_TRACE'] === '1');

    const benchCpu0 = process.cpuUsage();
    const t0 = performance.now();
    const results = await Promise.allSettled(many.map((d) => d.turn(utterance, 120_000)));
    const wallS = (performance.now() - t0) / 1000;
    const benchCpu = process.cpuUsage(benchCpu0);
    const benchCpuMs = (benchCpu.user + benchCpu.system) / 1000;
    const where = whereLate(
      t0,
      ticks.stop(),
      await pendingSeen.stop(),
      results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : [])),
    );
    b.log(`converse concurrency, where the late frames are: ${JSON.stringify(where)}`);
    const cpuTree = treeCpuUs(gateway.child.pid);
    const cpuMs = (cpuTree.total - cpu0.total) / 1000;
    const mainCpuMs = (cpuTree.main - cpu0.main) / 1000;
    benchLoop.disable();
    const gwLoopMaxMs = (await metric(gwUrl, 'voxgate_nodejs_eventloop_lag_max_seconds')) * 1000;
    // After the loop delay's scrape: every scrape resets the gateway's loop-delay histogram.
    const enc1 = await encoderCounters(gwUrl);
    const lateAfter = await lateFrames(gwUrl);
    const gwLate = {
      waiting: lateAfter.waiting - lateBefore.waiting,
      arrived: lateAfter.arrived - lateBefore.arrived,
      encoding: lateAfter.encoding - lateBefore.encoding,
    };
    const ok = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const late = ok.reduce((n, o) => n + o.lateFrames, 0);
    const framesDown = ok.reduce((n, o) => n + o.framesDown, 0);
    const maxAhead = Math.max(0, ...ok.map((o) => o.maxAhead));
    b.results.push({
      name: 'converse.concurrent_answered',
      value: ok.length,
      unit: 'conversations',
      floor: s.concurrent,
      ratio: ratio(ok.length, s.concurrent),
      params: {
        devices: s.concurrent,
        lateFrames: late,
        framesDown,
        maxFramesAhead: maxAhead,
        failed: results.length - ok.length,
        gatewayLateWaiting: gwLate.waiting,
        gatewayLateArrived: gwLate.arrived,
        gatewayLateEncoding: gwLate.encoding,
        encoderProcesses: enc1.processes,
        encoderLate: enc1.late - enc0.late,
        encoderFramesEased: enc1.eased - enc0.eased,
        benchCpuMs: round(benchCpuMs),
        encoderComplexityDown: enc1.down - enc0.down,
        encoderComplexityUp: enc1.up - enc0.up,
        encoderComplexityAtEnd: enc1.complexity,
        gatewayLoopDelayMaxMs: round(gwLoopMaxMs),
        lateWhere: where,
        benchLoopDelayMaxMs: round(benchLoop.max / 1e6),
        benchLoopDelayP99Ms: round(benchLoop.percentile(99) / 1e6),
        load: [round(load0, 2), round(loadavg()[0]!, 2)],
        note: 'goal: >= 100 with no frame late by more than one 60 ms period. lateFrames: at the devices (a frame arriving over 60 ms after playback of the ones before ran out); gatewayLate*: the same judged when the gateway sent it, split by cause (waiting: queued in time but sent late, a busy gateway loop; arrived: the stand-in audio reached the pacer late); loop delays: the gateway process and the bench process (devices and stand-ins)',
      },
    });
    // CPU per second of conversation: the uplink audio decoded and listened to, the answer encoded.
    const upS = (many.length * utterance.frames.length * 60) / 1000;
    const downS = (framesDown * 60) / 1000;
    const codec = await measureAudioCost(s.audioS);
    const frameCosts = await encoderFrameCosts(s.audioS);
    const encFrames = enc1.frames - enc0.frames;
    const gwEncUs = encFrames > 0 ? ((enc1.seconds - enc0.seconds) * 1e6) / encFrames : NaN;
    b.results.push({
      name: 'converse.encoder_us_per_frame',
      value: round(gwEncUs),
      unit: 'µs per 60 ms frame (24 kHz)',
      floor: round(frameCosts.native5),
      ratio: ratio(frameCosts.native5, gwEncUs),
      params: {
        framesEncoded: encFrames,
        nativeC5: round(frameCosts.native5),
        nativeC0: round(frameCosts.native0),
        wasmC5: round(frameCosts.wasm5),
        wasmC0: round(frameCosts.wasm0),
        note: "value: the codec's own time per frame in the gateway's encoder processes during the 100-at-once phase (wall time inside the codec, so a loaded machine inflates it); floor: the native addon at complexity 5 in the bench process (CPU time); nativeC*/wasmC*: @evan/opus's native addon and WebAssembly build, complexity 5 and 0, CPU µs per frame, same run",
      },
    });
    const floorMs = (codec.codecDecode16k * upS + codec.codecEncode24k * downS) / (upS + downS);
    const gwMsPerS = cpuMs / (upS + downS);
    b.results.push({
      name: 'converse.cpu_ms_per_audio_s',
      value: round(gwMsPerS),
      unit: 'ms CPU / s of audio',
      floor: round(floorMs),
      ratio: ratio(floorMs, gwMsPerS),
      params: {
        devices: s.concurrent,
        uplinkS: round(upS),
        downlinkS: round(downS),
        wallS: round(wallS),
        gatewayCpuMs: round(cpuMs),
        gatewayMainProcessCpuMs: round(mainCpuMs),
        encoderProcessesCpuMs: round(cpuMs - mainCpuMs),
        note: 'whole gateway (its process and its encoder processes; HTTP to the stand-ins, the assistant, pacing included) vs @evan/opus decode 16 kHz + encode 24 kHz alone',
      },
    });
    b.results.push({
      name: 'converse.audio_path_ms_per_audio_s',
      value: round(codec.decode16k + codec.vad16k + codec.encode24k),
      unit: 'ms CPU / s of audio',
      floor: round(codec.codecDecode16k + codec.codecEncode24k),
      ratio: ratio(codec.codecDecode16k + codec.codecEncode24k, codec.decode16k + codec.vad16k + codec.encode24k),
      params: { devices: 1, note: 'in process: Voxgate decode + speech detector + encode vs the codec alone, same frames' },
    });
    b.log(
      `converse concurrency: ${ok.length}/${s.concurrent} answered, ${late} late of ${framesDown} frames at the devices (as sent: ${gwLate.waiting} queued in time, ${gwLate.arrived} synthesised late, ${gwLate.encoding} encoded late), max ${maxAhead} ahead; loop delay max gateway ${gwLoopMaxMs.toFixed(0)} ms, bench ${(benchLoop.max / 1e6).toFixed(0)} ms; gateway ${gwMsPerS.toFixed(2)} ms CPU per s of audio (codec ${floorMs.toFixed(2)}; main process ${mainCpuMs.toFixed(0)} ms, encoders ${(cpuMs - mainCpuMs).toFixed(0)} ms); encoder ${enc1.processes} processes, ${gwEncUs.toFixed(0)} µs/frame (native ${frameCosts.native5.toFixed(0)}, wasm ${frameCosts.wasm5.toFixed(0)} at c5 here), complexity ${enc1.complexity} at the end (${enc1.down - enc0.down} steps down, ${enc1.eased - enc0.eased} frames eased); bench process ${benchCpuMs.toFixed(0)} ms CPU in ${wallS.toFixed(1)} s`,
    );
    const why = [
      ...new Set(results.flatMap((r) => (r.status === 'rejected' ? [String((r.reason as Error)?.message ?? r.reason).replace(/device \S+: /, '')] : []))),
    ];
    if (why.length) {
      const outcomes = await Promise.all(
        ['answered', 'failed', 'silence', 'empty_transcript', 'aborted', 'barge_in'].map(
          async (o) => `${o} ${await metric(gwUrl, 'voxgate_voice_converse_turns_total', { outcome: o })}`,
        ),
      );
      const state = `active ${await metric(gwUrl, 'voxgate_voice_converse_sessions_active')}, frames pending encoding ${await metric(gwUrl, 'voxgate_voice_converse_encoder_pending')}`;
      const errors = await metric(gwUrl, 'voxgate_voice_converse_provider_errors_total');
      b.log(
        `converse concurrency: ${results.length - ok.length} failed: ${why.slice(0, 3).join('; ')} (gateway: ${outcomes.join(', ')}; ${state}; provider errors ${errors})`,
      );
      for (const line of [...gateway.stdout, ...gateway.stderr].filter((l) => l.includes('failed')).slice(0, 3)) b.log(`  gateway: ${line.slice(0, 300)}`);
    }
    const turns = await metric(gwUrl, 'voxgate_voice_converse_turns_total', { outcome: 'answered' });
    if (turns < 2 * s.turns + ok.length) b.log(`converse: the gateway counted ${turns} answered turns (expected ${2 * s.turns + ok.length})`);
  } finally {
    for (const d of devices) d.close();
    replies.close();
    await gateway.stop();
    await Promise.all([speech.close(), llm.close()]);
  }
}

/**
 * Turns one after another on one device in one listen mode: Voxgate's own latency (what the device saw from its end
 * of speech to the first answer frame, less the stand-ins' fixed delays where they were on that path) and its parts.
 * The recogniser's delay is on the path only from the end of speech on: a transcription sent speculatively during
 * the detector's wait (asrStartMs < 0) is partly or wholly hidden, and only what was left is subtracted.
 */
async function latencyRows(b: Bench, one: ConversationDevice, utterance: Utterance, turns: number, mode: ListenMode, replies: Replies): Promise<void> {
  const load0 = loadavg()[0]!;
  replies.take();
  const seen: TurnObservation[] = [];
  for (let i = 0; i < turns; i++) seen.push(await one.turn(utterance, 30_000, mode));
  await until('every turn timed', () => Promise.resolve(replies.count() >= turns), 5000);
  const parts = replies.take();
  if (parts.length !== seen.length) throw new Error(`converse ${mode}: ${seen.length} turns but ${parts.length} timings`);
  const asrOnPath = (p: ReplyTimings) => Math.min(ASR_DELAY_MS, Math.max(0, (p.asrStartMs ?? 0) + ASR_DELAY_MS));
  const own = seen.map((o, i) => o.firstAudioMs - asrOnPath(parts[i]!) - TTS_DELAY_MS);
  // The detector's part: from the device's end of speech to the gateway's (the rest of the path is the gateway's timings).
  const vad = seen.map((o, i) => o.firstAudioMs - (parts[i]!.firstAudioMs ?? NaN));
  const params = {
    mode,
    devices: 1,
    turns,
    standIns: `asr ${ASR_DELAY_MS} ms, tts ${TTS_DELAY_MS} ms, llm streams at once`,
    asrStartP50Ms: round(median(parts.map((p) => p.asrStartMs ?? 0))),
    asrSubtractedP50Ms: round(median(parts.map(asrOnPath))),
    load: [round(load0, 2), round(loadavg()[0]!, 2)],
  };
  const endOfSpeech =
    mode === 'manual'
      ? 'manual (push to talk): from `listen stop`, sent right after the last voiced frame; no detector wait'
      : "auto: from the device sending the frame with the last voiced sample; includes the speech detector's end-of-speech wait (the vad part)";
  b.results.push({
    name: mode === 'manual' ? 'converse.own_latency_p50_ms' : 'converse.own_latency_auto_p50_ms',
    value: round(median(own)),
    unit: 'ms',
    floor: null,
    ratio: null,
    params: { ...params, note: `${endOfSpeech} -> first answer frame at the device, stand-in delays on the path subtracted; goal <= 50 ms` },
  });
  const rows: Array<[string, number[], string]> = [
    ['vad', vad, "device's end of speech -> the gateway's (detector wait; manual: the listen stop's transit)"],
    ['asr', parts.map((p) => p.asrMs ?? NaN), `transcript ready, from the gateway's end of speech (stand-in ${ASR_DELAY_MS} ms, minus any head start)`],
    ['llm_first_token', parts.map((p) => p.llmFirstTokenMs ?? NaN), "from the gateway's end of speech"],
    ['first_sentence', parts.map((p) => p.firstSentenceMs ?? NaN), "from the gateway's end of speech"],
    ['first_frame', parts.map((p) => p.firstAudioMs ?? NaN), `sent, from the gateway's end of speech (stand-in tts ${TTS_DELAY_MS} ms)`],
  ];
  for (const [label, v, note] of rows) {
    const ok = v.filter((x) => Number.isFinite(x));
    if (ok.length > 0)
      b.results.push({ name: `converse.part.${label}_p50_ms`, value: round(median(ok)), unit: 'ms', floor: null, ratio: null, params: { ...params, note } });
  }
  const p50 = (k: keyof ReplyTimings) => median(parts.map((p) => p[k] ?? NaN).filter(Number.isFinite)).toFixed(0);
  b.log(
    `converse ${mode}: own p50 ${median(own).toFixed(1)} ms over ${turns} turns (device saw ${median(seen.map((o) => o.firstAudioMs)).toFixed(1)}; ` +
      `vad ${median(vad).toFixed(0)}, asr ${p50('asrMs')} (sent at ${p50('asrStartMs')}), llm ${p50('llmFirstTokenMs')}, sentence ${p50('firstSentenceMs')}, frame ${p50('firstAudioMs')})`,
  );
}

async function lateFrames(gwUrl: string): Promise<{ waiting: number; arrived: number; encoding: number }> {
  const name = 'voxgate_voice_converse_frames_late_total';
  const [waiting, arrived, encoding] = await Promise.all(['waiting', 'arrived', 'encoding'].map((cause) => metric(gwUrl, name, { cause })));
  return { waiting: waiting!, arrived: arrived!, encoding: encoding! };
}

/** The gateway's encoder pool counters (voxgate_voice_converse_encoder_*). */
async function encoderCounters(gwUrl: string) {
  const m = (n: string, labels: Record<string, string> = {}) => metric(gwUrl, `voxgate_voice_converse_encoder_${n}`, labels);
  const [frames, seconds, late, down, up, complexity, processes, eased] = await Promise.all([
    m('frames_total'),
    m('seconds_total'),
    m('late_total'),
    m('complexity_changes_total', { direction: 'down' }),
    m('complexity_changes_total', { direction: 'up' }),
    m('complexity'),
    m('processes'),
    m('frames_eased_total'),
  ]);
  return { frames: frames!, seconds: seconds!, late: late!, down: down!, up: up!, complexity: complexity!, processes: processes!, eased: eased! };
}

function benchEncoderSettings(): Record<string, unknown> {
  const env = process.env;
  return {
    ...(env['VOXGATE_BENCH_OPUS_COMPLEXITY'] ? { encoderComplexity: Number(env['VOXGATE_BENCH_OPUS_COMPLEXITY']) } : {}),
    ...(env['VOXGATE_BENCH_OPUS_PROCESSES'] ? { encoderProcesses: Number(env['VOXGATE_BENCH_OPUS_PROCESSES']) } : {}),
    ...(env['VOXGATE_BENCH_OPUS_ADAPTIVE'] ? { adaptiveComplexity: env['VOXGATE_BENCH_OPUS_ADAPTIVE'] !== 'false' } : {}),
  };
}

/** CPU of a process and of its child processes (the gateway's encoder processes), µs. */
function treeCpuUs(pid: number | undefined): { main: number; total: number } {
  const main = cpuUs(pid);
  let kids: number[] = [];
  try {
    kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    /* not Linux, or gone */
  }
  return { main, total: main + kids.reduce((sum, k) => sum + (cpuUs(k) || 0), 0) };
}

/** The bench process's own timer ticks (every 10 ms asked): a gap between two says its event loop was held up. */
function sampleTicks(): { stop(): number[] } {
  const at: number[] = [];
  const t = setInterval(() => at.push(performance.now()), 10);
  return {
    stop: () => {
      clearInterval(t);
      return at;
    },
  };
}

/** The gateway's frames waiting for the encoder (its gauge, updated every 500 ms), sampled every 500 ms for 30 s at most. */
function samplePending(gwUrl: string, on: boolean): { stop(): Promise<Array<[number, number]>> } {
  const seen: Array<[number, number]> = [];
  const loop = (async () => {
    while (on && seen.length < 60) {
      const v = await metric(gwUrl, 'voxgate_voice_converse_encoder_pending').catch(() => NaN);
      seen.push([performance.now(), v]);
      await new Promise((r) => setTimeout(r, 500));
    }
  })();
  return {
    stop: async () => {
      on = false;
      await loop;
      return seen;
    },
  };
}

/**
 * Where the late frames fall: their index in the answer (the stand-in's first sentence is 11 frames, so 11 is the
 * second sentence's first), when (from the phase's start and from the device's first frame), how long the device was
 * dry, the bench's own loop gap around the arrival (its timers stamped late), and the gateway's encoder queue then.
 */
function whereLate(t0: number, ticks: number[], pending: Array<[number, number]>, seen: TurnObservation[]) {
  const late = seen.flatMap((o) => o.late.map((l) => ({ ...l, sinceFirst: l.at - o.firstAt })));
  const count = (key: (l: (typeof late)[number]) => number | string) => {
    const m = new Map<number | string, number>();
    for (const l of late) m.set(key(l), (m.get(key(l)) ?? 0) + 1);
    return Object.fromEntries([...m].sort((a, b) => (a[0] < b[0] ? -1 : 1)));
  };
  const gapAround = (at: number, dry: number) => {
    let g = 0;
    for (let i = 1; i < ticks.length; i++) if (ticks[i]! >= at - dry - 60 && ticks[i - 1]! <= at) g = Math.max(g, ticks[i]! - ticks[i - 1]!);
    return g;
  };
  const gaps = late.map((l) => gapAround(l.at, l.dryMs));
  const tickGaps = ticks.slice(1).map((t, i) => t - ticks[i]!);
  const firsts = seen.map((o) => o.firstAt - t0).sort((a, b) => a - b);
  const q = (v: number[], p: number) => round(v.length ? [...v].sort((a, b) => a - b)[Math.floor((v.length - 1) * p)]! : NaN);
  return {
    byIndex: count((l) => l.index),
    byPhase100ms: count((l) => Math.floor((l.at - t0) / 100) * 100),
    bySinceFirst100ms: count((l) => Math.floor(l.sinceFirst / 100) * 100),
    dryMs: {
      p50: q(
        late.map((l) => l.dryMs),
        0.5,
      ),
      max: q(
        late.map((l) => l.dryMs),
        1,
      ),
    },
    benchTickGapAroundLateMs: { p50: q(gaps, 0.5), max: q(gaps, 1) },
    benchTickGapMs: { p50: q(tickGaps, 0.5), p99: q(tickGaps, 0.99), max: q(tickGaps, 1) },
    firstFrameFromPhaseStartMs: { min: q(firsts, 0), p50: q(firsts, 0.5), max: q(firsts, 1) },
    gatewayEncoderPending: pending.map(([t, v]) => `${Math.round(t - t0)}:${v}`).join(' '),
  };
}

function median(v: readonly number[]): number {
  const s = [...v].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.floor((s.length - 1) / 2)]!;
}

/** voice.reply timings from the gateway's event stream (SSE). */
interface Replies {
  ready: Promise<void>;
  count(): number;
  take(): ReplyTimings[];
  close(): void;
}

function collectReplies(gwUrl: string): Replies {
  const ac = new AbortController();
  let got: ReplyTimings[] = [];
  const ready = (async () => {
    const res = await fetch(`${gwUrl}/v1/events?type=voice.reply`, { headers: { authorization: `Bearer ${API_KEY}` }, signal: ac.signal });
    if (!res.ok || !res.body) throw new Error(`GET /v1/events: ${res.status}`);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    void (async () => {
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
        if (done) return;
        buf += value;
        let i: number;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const data = block.split('\n').find((l) => l.startsWith('data:'));
          if (!data) continue;
          const e = JSON.parse(data.slice(5)) as { data?: { timings?: ReplyTimings } };
          if (e.data?.timings) got.push(e.data.timings);
        }
      }
    })();
  })();
  return {
    ready,
    count: () => got.length,
    take: () => {
      const t = got;
      got = [];
      return t;
    },
    close: () => ac.abort(),
  };
}
