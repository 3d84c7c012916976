/**
 * What one device's flood costs another device's callers (docs/performance.md, "dawn" and "readbudget"). The compiled
 * gateway on its embedded defaults, one honest WebSocket device answering `tools/call`, and an HTTP client calling it in
 * a loop (a `/healthz` after each call) for 2 s (warm-up, not counted) and 3 s, then 5 s more while a second device, in a process of its own, sends
 * one kind of frame as fast as its socket takes them. Prints the honest calls made in each window, their p50 and p99,
 * the gateway's process CPU per second of the window (/proc/<pid>/stat), and how often it paused the flooder's reads.
 *   node --import tsx bench/tools/flood-probe.ts [mode...] [--flooders=N] [--gateway-arg=<node option>]... [--gateway-dir=<dir>]
 * Modes: none (the flooder connected and silent), notif (`notifications/message`), listen (`listen` JSON), reply (MCP
 * results for an id never asked), big (60 KB `listen` frames), bin (400-byte binary frames, voice off). Default: all.
 * `--gateway-dir` runs another checkout's build (an older commit in a worktree) for a before/after comparison.
 * `--flooders=N` (default 1): N flooding devices from the one process and address, each writing as fast as its socket
 * takes frames (many devices, each under its own budget).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { gatewayNodeArgs } from '../lib/compiled.js';
import { cpuUs } from '../lib/cpu.js';

const MODES = ['none', 'notif', 'listen', 'reply', 'big', 'bin'] as const;
type Mode = (typeof MODES)[number];
const KEY = 'vxg_flood_probe_key_0123456789abcdef';
const HELLO = JSON.stringify({
  type: 'hello',
  version: 1,
  transport: 'websocket',
  audio_params: { format: 'opus', sample_rate: 16000, channels: 1, frame_duration: 60 },
});
const mcp = (payload: Record<string, unknown>) => JSON.stringify({ session_id: '', type: 'mcp', payload });
const FLOOD_FRAMES: Record<Exclude<Mode, 'none' | 'bin'>, string> = {
  notif: mcp({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'x'.repeat(40) } }),
  listen: JSON.stringify({ session_id: '', type: 'listen', state: 'detect', text: 'hi' }),
  reply: mcp({ jsonrpc: '2.0', id: 987654, result: { content: [] } }),
  big: JSON.stringify({ session_id: '', type: 'listen', state: 'detect', text: 'y'.repeat(60_000) }),
};

/** A device that answers initialize and tools/list (and `tools/call` with `pong`); resolves once it is listed. */
function device(port: number, deviceId: string, tools: unknown[]): Promise<WebSocket> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/xiaozhi/v1/`, { headers: { 'device-id': deviceId } });
  return new Promise((ready, fail) => {
    ws.once('error', fail);
    ws.once('open', () => ws.send(HELLO));
    ws.on('message', (data, binary) => {
      if (binary) return;
      const m = JSON.parse(String(data)) as { type?: string; payload?: { id?: number; method?: string } };
      const p = m.payload;
      if (m.type !== 'mcp' || !p) return;
      const reply = (result: unknown) => ws.send(mcp({ jsonrpc: '2.0', id: p.id, result }));
      if (p.method === 'initialize') reply({ protocolVersion: '2024-11-05', capabilities: {}, serverInfo: { name: deviceId, version: '1' } });
      else if (p.method === 'tools/list') {
        reply({ tools });
        // Ready once the gateway has the page (its device.ready follows the reply).
        setTimeout(() => ready(ws), 300);
      } else if (p.method === 'tools/call') reply({ content: [{ type: 'text', text: 'pong' }], isError: false });
    });
  });
}

/** The flooder's process: connects, says 'ready', and on 'go' writes its frames while its socket takes them. */
async function flooder(port: number, mode: Mode, count: number): Promise<void> {
  const id = (i: number) => `02:00:00:00:${(0x99 - (i >> 8)).toString(16)}:${(i & 0xff).toString(16).padStart(2, '0')}`;
  const sockets = await Promise.all(Array.from({ length: count }, (_, i) => device(port, id(i), [])));
  process.send?.('ready');
  process.on('message', (m) => {
    if (m !== 'go' || mode === 'none') return;
    const audio = Buffer.alloc(400);
    const pump = () => {
      for (const ws of sockets)
        for (let i = 0; i < 64 && ws.bufferedAmount < 1 << 20; i++) {
          if (mode === 'bin') ws.send(audio, { binary: true });
          else ws.send(FLOOD_FRAMES[mode]);
        }
      setImmediate(pump);
    };
    pump();
  });
}

interface Window {
  calls: number;
  p50: number;
  p99: number;
  /** The gateway's CPU, ms per second of the window. */
  cpu: number;
}

async function callLoop(port: number, deviceId: string, ms: number, pid: number | undefined): Promise<Window> {
  const lat: number[] = [];
  const cpu0 = cpuUs(pid);
  const t0 = performance.now();
  const end = performance.now() + ms;
  const base = `http://127.0.0.1:${port}`;
  while (performance.now() < end) {
    const t0 = performance.now();
    const r = await fetch(`${base}/v1/devices/${deviceId}/tools/ping/call`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: '{"arguments":{}}',
    });
    await r.text();
    await (await fetch(`${base}/healthz`)).text();
    if (r.status === 200) lat.push(performance.now() - t0);
  }
  const cpu = Math.round((cpuUs(pid) - cpu0) / (performance.now() - t0));
  lat.sort((a, b) => a - b);
  const at = (q: number) => Math.round((lat[Math.min(lat.length - 1, Math.floor(lat.length * q))] ?? NaN) * 10) / 10;
  return { calls: lat.length, p50: at(0.5), p99: at(0.99), cpu };
}

const exited = (p: ChildProcess) => new Promise<void>((r) => (p.exitCode !== null ? r() : p.once('exit', () => r())));

async function probe(dir: string, mode: Mode, flooders: number): Promise<void> {
  const data = mkdtempSync(join(tmpdir(), 'flood-probe-'));
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const gateway = spawn(process.execPath, [...gatewayNodeArgs(), ...gatewayArgs, join(dir, 'gateway/dist/main.js')], {
    cwd: dir,
    env: {
      ...process.env,
      GATEWAY_API_KEYS: KEY,
      GATEWAY_HTTP_HOST: '127.0.0.1',
      GATEWAY_HTTP_PORT: String(port),
      GATEWAY_MQTT_HOST: '127.0.0.1',
      GATEWAY_MQTT_PORT: String(port + 1),
      GATEWAY_DATA_DIR: data,
      GATEWAY_LOG_LEVEL: 'error',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  let child: ChildProcess | undefined;
  try {
    for (;;) {
      if (gateway.exitCode !== null) throw new Error(`the gateway exited (${gateway.exitCode})`);
      const up = await fetch(`http://127.0.0.1:${port}/healthz`).then(
        (r) => r.ok,
        () => false,
      );
      if (up) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const honest = '02:00:00:00:11:11';
    const ws = await device(port, honest, [{ name: 'ping', description: 'answers pong', inputSchema: { type: 'object', properties: {} } }]);
    const self = fileURLToPath(import.meta.url);
    const flood = spawn(process.execPath, ['--import', 'tsx', self, '--flooder', String(port), mode, String(flooders)], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    child = flood;
    await new Promise<void>((r) => flood.on('message', (m) => m === 'ready' && r()));
    await callLoop(port, honest, 2000, gateway.pid); // the gateway's JIT warm-up, not counted
    const quiet = await callLoop(port, honest, 3000, gateway.pid);
    const load = loadavg()[0]!.toFixed(1);
    flood.send('go');
    const flooded = await callLoop(port, honest, 5000, gateway.pid);
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${KEY}` } })).text();
    const paused = metrics
      .split('\n')
      .filter((l) => l.startsWith('voxgate_device_reads_paused_total{'))
      .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
    const w = (x: Window) => `${x.calls} calls, p50 ${x.p50} ms, p99 ${x.p99} ms, gateway CPU ${x.cpu} ms/s`;
    console.log(`${mode.padEnd(6)} load ${load}  quiet 3 s: ${w(quiet)}  |  5 s of flood: ${w(flooded)}  |  reads paused: ${paused}`);
    ws.terminate();
  } finally {
    child?.kill('SIGKILL');
    gateway.kill('SIGTERM');
    await exited(gateway);
    rmSync(data, { recursive: true, force: true });
  }
}

const args = process.argv.slice(2);
/** `--gateway-arg=<node option>` (repeatable): e.g. `--cpu-prof` for the gateway's profile of the whole probe. */
const gatewayArgs = args.filter((a) => a.startsWith('--gateway-arg=')).map((a) => a.slice('--gateway-arg='.length));
if (args[0] === '--flooder') await flooder(Number(args[1]), args[2] as Mode, Number(args[3]));
else {
  const dirArg = args.find((a) => a.startsWith('--gateway-dir='));
  const dir = resolve(dirArg ? dirArg.slice('--gateway-dir='.length) : fileURLToPath(new URL('../..', import.meta.url)));
  const modes = args.filter((a): a is Mode => (MODES as readonly string[]).includes(a));
  const flooders = Number(args.find((a) => a.startsWith('--flooders='))?.slice('--flooders='.length) ?? 1);
  console.log(`gateway build: ${dir}; ${flooders} flooding device(s)`);
  for (const mode of modes.length > 0 ? modes : MODES) await probe(dir, mode, flooders);
}
