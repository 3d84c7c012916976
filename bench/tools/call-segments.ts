/**
 * One call's round trip at concurrency 1, cut into the pieces each process and the kernel add, from one `perf record` of
 * the syscall tracepoints of the three processes on its path (the load generator, the server, the device simulator):
 * their socket system calls (read, write, writev) and `epoll_pwait`, on one clock. A tracepoint does not stop the process
 * at each system call as strace does; it adds a few µs per call, alike for any server.
 *
 * Per call, in the order the call travels (µs; a read counts when it returns, a write when it is entered, since a
 * loopback write wakes its reader during the write):
 *   in→dev   the server: the HTTP request read → the request frame's write to the device   (before its device write)
 *   dev      the device simulator: its read of the frame → its reply's write, with the kernel's hand-offs either side
 *   dev→out  the server: the device's reply read → the HTTP response's write               (before its response write)
 *   client   the load generator: the response's read → the next request's write, with the hand-offs either side
 * and, overlapping the others, the server's work after each write until it waits again (`after`: the write → its next
 * `epoll_pwait`). At c=1 the four pieces add up to the round trip; what the server does after a write counts only
 * when it outlasts what the other processes do meanwhile.
 *
 * Sockets are told apart by their peer process (/proc's descriptors and TCP table, while the calls run): the server's socket to the load
 * generator is the API's, its sockets to the device simulator are devices'.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { readFile, readdir, readlink } from 'node:fs/promises';

interface Sys {
  /** Entry, ms (perf's clock). */
  t: number;
  /** Return, ms. */
  end: number;
  pid: number;
  tid: number;
  call: string;
  fd: number;
  ret: number;
}

/** A CPU sample (cpu-clock) with its call chain, leaf first: `symbol (dso)` per frame. */
export interface Sample {
  t: number;
  pid: number;
  tid: number;
  frames: string[];
}

/**
 * `perf script -F pid,tid,time,event,trace,ip,sym,dso` of the syscall tracepoints (each entry paired with its thread's
 * return) and of the CPU samples, if any (their call chains, leaf first).
 */
export function parsePerfScript(text: string): { sys: Sys[]; samples: Sample[] } {
  const out: Sys[] = [];
  const samples: Sample[] = [];
  const open = new Map<number, { t: number; pid: number; call: string; fd: number }>();
  const HEAD = /^\s*(\d+)\/(\d+)\s+(\d+\.\d+):\s+(?:\d+\s+)?([\w:-]+):\s*(.*)$/;
  const SYS = /^syscalls:sys_(enter|exit)_(\w+)$/;
  let sample: Sample | undefined;
  for (const l of text.split('\n')) {
    const m = HEAD.exec(l);
    if (!m) {
      // A call chain's frame: `<ip> <symbol> (<dso>)`.
      if (sample && l.trim() !== '') sample.frames.push(l.trim());
      else sample = undefined;
      continue;
    }
    sample = undefined;
    const [, pid, tid, time, event, rest] = m;
    const t = Number(time) * 1e3;
    if (event === 'cpu-clock') {
      sample = { t, pid: Number(pid), tid: Number(tid), frames: [] };
      samples.push(sample);
      continue;
    }
    const sm = SYS.exec(event!);
    if (!sm) continue;
    const [, kind, call] = sm;
    if (kind === 'enter') {
      const fd = /fd: (0x[0-9a-f]+)/.exec(rest!);
      open.set(Number(tid), { t, pid: Number(pid), call: call!, fd: fd ? Number(fd[1]) : -1 });
      continue;
    }
    const e = open.get(Number(tid));
    open.delete(Number(tid));
    if (!e || e.call !== call) continue;
    const ret = /^(0x[0-9a-f]+|-?\d+)/.exec(rest!.trim())?.[1] ?? '-1';
    out.push({ t: e.t, end: t, pid: e.pid, tid: Number(tid), call: e.call, fd: e.fd, ret: ret.startsWith('0x') ? toSigned(ret) : Number(ret) });
  }
  return { sys: out.sort((a, b) => a.t - b.t), samples: samples.sort((a, b) => a.t - b.t) };
}

/** A return value printed as 64-bit hex (errors are negative). */
function toSigned(hex: string): number {
  const v = BigInt(hex);
  return Number(v >= 1n << 63n ? v - (1n << 64n) : v);
}

/**
 * fd → the process at the other end, for the TCP sockets of each of `pids` whose peer is one of `pids` (read from
 * /proc/<pid>/fd and /proc/net/tcp, without blocking the caller's loop for long: `ss -p` scans every process's
 * descriptors, seconds on a machine holding a 10 000-device fleet, which stalled the load generator it ran in).
 */
export async function socketPeers(pids: number[]): Promise<Map<number, Map<number, number>>> {
  const owner = new Map<string, { pid: number; fd: number }>();
  for (const pid of pids)
    for (const fd of await readdir(`/proc/${pid}/fd`).catch(() => [] as string[])) {
      const link = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
      const m = /^socket:\[(\d+)\]$/.exec(link);
      if (m) owner.set(m[1]!, { pid, fd: Number(fd) });
    }
  const ends = new Map<string, { local: string; remote: string }>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6'])
    for (const line of (await readFile(table, 'utf8').catch(() => '')).split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length > 9 && owner.has(f[9]!)) ends.set(f[9]!, { local: f[1]!, remote: f[2]! });
    }
  const byLocal = new Map<string, number>();
  for (const [inode, e] of ends) byLocal.set(e.local, owner.get(inode)!.pid);
  const out = new Map(pids.map((p) => [p, new Map<number, number>()]));
  for (const [inode, e] of ends) {
    const peer = byLocal.get(e.remote);
    const me = owner.get(inode)!;
    if (peer !== undefined) out.get(me.pid)!.set(me.fd, peer);
  }
  return out;
}

export interface Segments {
  calls: number;
  /** Median, p90 and mean (up to p99) of each piece, µs. */
  inToDev: Stat;
  dev: Stat;
  devToOut: Stat;
  client: Stat;
  /** The server's work after its device write / response write until it waits (epoll_pwait), µs. */
  afterDev: Stat;
  afterOut: Stat;
  /** The round trip (the HTTP request's read to the next one's), µs. */
  round: Stat;
  /** Pieces of the device simulator's and the load generator's own: read → write inside the process, µs. */
  devOwn: Stat;
  clientOwn: Stat;
  /** System calls the server makes between the request's read and the device write (all kinds traced), median. */
  sysInToDev: number;
  sysDevToOut: number;
  /** The server's windows, call by call (ms on perf's clock), for the CPU samples' attribution. */
  windows: Window[];
}

export type Stat = [p50: number, p90: number, mean: number];
export type WindowKind = 'in→dev' | 'dev→out' | 'after dev' | 'after out';
export interface Window {
  kind: WindowKind;
  start: number;
  end: number;
}

const stat = (xs: number[]): [number, number, number] => {
  const s = [...xs].sort((a, b) => a - b);
  // The mean of the calls up to p99 (a rare stall of the whole machine left out): the rate at c=1 is 1 / the mean round trip.
  const kept = s.slice(0, Math.max(1, Math.ceil(s.length * 0.99)));
  return [s[Math.floor(s.length * 0.5)] ?? NaN, s[Math.floor(s.length * 0.9)] ?? NaN, kept.reduce((a, b) => a + b, 0) / kept.length];
};

/** Cuts the traced calls of `server` (its API socket to `client`, its device sockets to `device`) into pieces. */
export function segments(
  all: Sys[],
  who: { server: number; device: number; client: number },
  peers: { server: Map<number, number>; device: Map<number, number>; client: Map<number, number> },
): Segments {
  const isDev = (fd: number) => peers.server.get(fd) === who.device;
  const server = all.filter((s) => s.pid === who.server && s.tid === who.server);
  // The API socket: the one whose peer is the load generator; when the sockets were read before or after it was open
  // (seen once on a loaded machine), the busiest socket that is not a device's.
  const apiFds = new Set([...peers.server].filter(([, p]) => p === who.client).map(([fd]) => fd));
  if (![...apiFds].some((fd) => server.some((s) => s.fd === fd && s.call === 'read'))) {
    const reads = new Map<number, number>();
    for (const s of server) if (s.call === 'read' && s.ret > 0 && !isDev(s.fd)) reads.set(s.fd, (reads.get(s.fd) ?? 0) + 1);
    const busiest = [...reads].sort((a, b) => b[1] - a[1])[0];
    if (busiest) apiFds.add(busiest[0]);
  }
  const isApi = (fd: number) => apiFds.has(fd);
  const dev = all.filter((s) => s.pid === who.device && peers.device.get(s.fd) === who.server && s.call !== 'epoll_pwait');
  const cli = all.filter((s) => s.pid === who.client && peers.client.get(s.fd) === who.server && s.call !== 'epoll_pwait');
  const w = {
    inToDev: [] as number[],
    dev: [] as number[],
    devToOut: [] as number[],
    client: [] as number[],
    afterDev: [] as number[],
    afterOut: [] as number[],
    round: [] as number[],
  };
  const own = { dev: [] as number[], client: [] as number[], sysIn: [] as number[], sysOut: [] as number[] };
  const isRead = (s: Sys) => s.call === 'read' && s.ret > 0;
  const isWrite = (s: Sys) => (s.call === 'write' || s.call === 'writev') && s.ret > 0;
  let lastReqIn: number | undefined;
  const windows: Window[] = [];
  for (let i = 0; i < server.length; i++) {
    const r = server[i]!;
    if (!isRead(r) || !isApi(r.fd)) continue;
    // The request's read → the device write → the reply's read → the response's write, in that order.
    let j = i + 1;
    const find = (pred: (s: Sys) => boolean): Sys | undefined => {
      for (; j < server.length; j++) if (pred(server[j]!)) return server[j++];
      return undefined;
    };
    const start = j;
    const dw = find((s) => isWrite(s) && isDev(s.fd));
    const sysIn = j - start - 1;
    const afterDw = find((s) => s.call === 'epoll_pwait');
    const dr = find((s) => isRead(s) && isDev(s.fd));
    const mid = j;
    const aw = find((s) => isWrite(s) && isApi(s.fd));
    const sysOut = j - mid - 1;
    const afterAw = find((s) => s.call === 'epoll_pwait');
    if (!dw || !dr || !aw || !afterDw || !afterAw) break;
    // Another API read in between: concurrency above 1 or a broken sequence; skipped.
    if (server.slice(i + 1, j).some((s) => isRead(s) && isApi(s.fd))) continue;
    w.inToDev.push((dw.t - r.end) * 1e3);
    w.devToOut.push((aw.t - dr.end) * 1e3);
    w.dev.push((dr.end - dw.t) * 1e3);
    w.afterDev.push((afterDw.t - dw.t) * 1e3);
    w.afterOut.push((afterAw.t - aw.t) * 1e3);
    windows.push(
      { kind: 'in→dev', start: r.end, end: dw.t },
      { kind: 'after dev', start: dw.t, end: afterDw.t },
      { kind: 'dev→out', start: dr.end, end: aw.t },
      { kind: 'after out', start: aw.t, end: afterAw.t },
    );
    own.sysIn.push(sysIn);
    own.sysOut.push(sysOut);
    let next: Sys | undefined;
    for (let k = j; k < server.length && !next; k++) if (isRead(server[k]!) && isApi(server[k]!.fd)) next = server[k];
    if (next) w.client.push((next.end - aw.t) * 1e3);
    if (lastReqIn !== undefined && r.end - lastReqIn < 50) w.round.push((r.end - lastReqIn) * 1e3);
    lastReqIn = r.end;
  }
  const ownPiece = (xs: Sys[], into: number[]) => {
    for (let i = 0; i < xs.length; i++) {
      const r = xs[i]!;
      if (!isRead(r)) continue;
      const wr = xs.slice(i + 1, i + 8).find((s) => isWrite(s) && s.fd === r.fd);
      if (wr) into.push((wr.t - r.end) * 1e3);
    }
  };
  ownPiece(dev, own.dev);
  ownPiece(cli, own.client);
  return {
    calls: w.inToDev.length,
    inToDev: stat(w.inToDev),
    dev: stat(w.dev),
    devToOut: stat(w.devToOut),
    client: stat(w.client),
    afterDev: stat(w.afterDev),
    afterOut: stat(w.afterOut),
    round: stat(w.round),
    devOwn: stat(own.dev),
    clientOwn: stat(own.client),
    sysInToDev: stat(own.sysIn)[0],
    sysDevToOut: stat(own.sysOut)[0],
    windows,
  };
}

/**
 * perf names a JIT frame from the process's perf map (/tmp/perf-<pid>.map), whose entries are never taken back: where
 * V8 freed code and put other code at the same address, perf may show the freed code's name (the floor's samples named
 * ajv and semver, which it runs at start-up only). Each JIT frame is named again here by the map's last entry that covers
 * its address: that is the code there when the samples were taken, after the warm-up.
 */
export function renameJitFrames(samples: Sample[], pid: number): void {
  let lines: string[];
  try {
    lines = readFileSync(`/tmp/perf-${pid}.map`, 'utf8').split('\n');
  } catch {
    return;
  }
  const entries = lines
    .map((l, order) => {
      const m = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(l);
      return m ? { start: parseInt(m[1]!, 16), end: parseInt(m[1]!, 16) + parseInt(m[2]!, 16), name: m[3]!, order } : undefined;
    })
    .filter((e) => e !== undefined)
    .sort((a, b) => a.start - b.start);
  const starts = entries.map((e) => e.start);
  const maxLen = entries.reduce((m, e) => Math.max(m, e.end - e.start), 0);
  const cache = new Map<number, string | undefined>();
  const lookup = (ip: number): string | undefined => {
    if (cache.has(ip)) return cache.get(ip);
    let lo = 0;
    let hi = starts.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (starts[mid]! <= ip) lo = mid + 1;
      else hi = mid;
    }
    let best: (typeof entries)[number] | undefined;
    for (let i = lo - 1; i >= 0 && entries[i]!.start > ip - maxLen - 1; i--) {
      const e = entries[i]!;
      if (e.end > ip && (!best || e.order > best.order)) best = e;
    }
    cache.set(ip, best?.name);
    return best?.name;
  };
  const mapFile = `/tmp/perf-${pid}.map`;
  for (const s of samples)
    s.frames = s.frames.map((f) => {
      if (!f.endsWith(`(${mapFile})`)) return f;
      const ip = parseInt(f.slice(0, f.indexOf(' ')), 16);
      const name = lookup(ip);
      return name === undefined ? f : `${f.slice(0, f.indexOf(' '))} ${name} (${mapFile})`;
    });
}

/** What a frame belongs to: a JS frame's package or the gateway's folder, else the native code's library. */
export function frameOwner(line: string): { js: boolean; owner: string; name: string } {
  const frame = line.replace(/^[0-9a-f]+ /, '');
  const dso = /\(([^()]*)\)$/.exec(frame)?.[1] ?? '';
  const sym = frame.slice(0, frame.length - dso.length - 2).trim();
  if (sym.startsWith('JS:') || dso.includes('/perf-')) {
    const [kindName = '', where = ''] = sym.slice(3).split(' ');
    const name = kindName.replace(/^[*^~+-]/, '');
    const file = where.replace(/:\d+:\d+$/, '');
    const nm = /.*\/node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(file);
    let owner: string;
    if (nm) owner = nm[1]!;
    else if (/\/gateway\/(?:dist|src)\//.test(file))
      owner = `gateway/${/\/gateway\/(?:dist|src)\/([^/]+)(\/)?/
        .exec(file)!
        .slice(1)
        .join('')
        .replace(/\/$|\.[jt]s$/, '')}`;
    else if (/\/protocol\/(?:dist|src)\//.test(file)) owner = 'protocol';
    else if (/\/bench\//.test(file)) owner = 'bench';
    else if (file.startsWith('node:')) owner = file.split('/').slice(0, 2).join('/');
    else if (sym.startsWith('JS:') && file === '') owner = 'v8 builtin';
    else owner = sym.startsWith('JS:') ? 'JS other' : 'JIT code';
    return { js: true, owner, name: `${name} ${file.split('/').slice(-2).join('/')}` };
  }
  if (dso.includes('kernel')) return { js: false, owner: 'kernel', name: sym };
  if (dso.endsWith('/node')) return { js: false, owner: /^(v8::|Builtins_|void v8::|Builtin:)/.test(sym) ? 'v8' : 'node C++', name: sym };
  return { js: false, owner: dso.split('/').pop() || 'unknown', name: sym };
}

export interface Attribution {
  kind: WindowKind;
  /** µs per call: the window's wall time, and the CPU samples in it (the rest: the thread was off the CPU). */
  wallUs: number;
  cpuUs: number;
  /** µs per call by the innermost JS frame's owner (native code counted to the JS that called it), and by that function. */
  byOwner: Array<[string, number]>;
  byFunction: Array<[string, number]>;
  /** µs per call of native code by its leaf (GC, the runtime, the kernel). */
  byNative: Array<[string, number]>;
}

/** The server main thread's CPU samples (one every `periodUs` of CPU) counted to the window they fall in. */
export function attribute(samples: Sample[], windows: Window[], tid: number, periodUs: number): Attribution[] {
  const own = samples.filter((x) => x.tid === tid);
  const kinds = [...new Set(windows.map((w) => w.kind))];
  // SEGMENTS_SLOW=q: only the windows longer than that quantile of their kind (what the tail is made of).
  const slowQ = Number(process.env['SEGMENTS_SLOW'] ?? 0);
  return kinds.map((kind) => {
    let ws = windows.filter((w) => w.kind === kind).sort((a, b) => a.start - b.start);
    if (slowQ > 0) {
      const lengths = ws.map((w) => w.end - w.start).sort((a, b) => a - b);
      const cut = lengths[Math.floor(lengths.length * slowQ)]!;
      ws = ws.filter((w) => w.end - w.start > cut);
    }
    const calls = ws.length;
    const byOwner = new Map<string, number>();
    const byFunction = new Map<string, number>();
    const byNative = new Map<string, number>();
    let n = 0;
    let wall = 0;
    let k = 0;
    for (const w of ws) {
      wall += w.end - w.start;
      while (k < own.length && own[k]!.t < w.start) k++;
      for (let i = k; i < own.length && own[i]!.t < w.end; i++) {
        n++;
        const frames = own[i]!.frames.map(frameOwner);
        const js = frames.find((f) => f.js);
        const owner = js?.owner ?? `${frames[0]?.owner ?? 'unknown'} (no JS)`;
        byOwner.set(owner, (byOwner.get(owner) ?? 0) + 1);
        const fn = js ? `${js.owner}: ${js.name}` : owner;
        byFunction.set(fn, (byFunction.get(fn) ?? 0) + 1);
        if (frames[0] && !frames[0].js) byNative.set(`${frames[0].owner}: ${frames[0].name}`, (byNative.get(`${frames[0].owner}: ${frames[0].name}`) ?? 0) + 1);
      }
    }
    const per = (m: Map<string, number>) =>
      [...m].sort((a, b) => b[1] - a[1]).map(([key, c]) => [key, (c * periodUs) / Math.max(1, calls)] as [string, number]);
    return {
      kind,
      wallUs: (wall * 1e3) / Math.max(1, calls),
      cpuUs: (n * periodUs) / Math.max(1, calls),
      byOwner: per(byOwner),
      byFunction: per(byFunction),
      byNative: per(byNative),
    };
  });
}

export function describeAttribution(a: Attribution, top = Number(process.env['SEGMENTS_TOP'] ?? 12)): string {
  const list = (xs: Array<[string, number]>) =>
    xs
      .slice(0, top)
      .map(([k, v]) => `${v.toFixed(1)} ${k}`)
      .join('; ');
  return (
    `  ${a.kind}: wall ${a.wallUs.toFixed(1)} µs/call, sampled CPU ${a.cpuUs.toFixed(1)}\n` +
    `    by owner: ${list(a.byOwner)}\n    by function: ${list(a.byFunction)}\n    native leaves: ${list(a.byNative)}`
  );
}

export function describeSegments(s: Segments): string {
  const f = ([p50, p90, mean]: Stat) => `${p50.toFixed(0)}/${p90.toFixed(0)}/${mean.toFixed(0)}`;
  return (
    `${s.calls} calls; µs p50/p90/mean: round trip ${f(s.round)} = server in→dev ${f(s.inToDev)} + device ${f(s.dev)} + server dev→out ${f(s.devToOut)} + client ${f(s.client)}; ` +
    `server after its device write ${f(s.afterDev)}, after its response write ${f(s.afterOut)}; device's own read→write ${f(s.devOwn)}, load generator's ${f(s.clientOwn)}; ` +
    `server system calls inside in→dev ${s.sysInToDev}, dev→out ${s.sysDevToOut}`
  );
}

const EVENTS = ['read', 'write', 'writev', 'epoll_pwait'].flatMap((c) => [`syscalls:sys_enter_${c}`, `syscalls:sys_exit_${c}`]).join(',');

/**
 * `perf record` of the syscall tracepoints of `pids` (into `file`, read back with `perf script`) while `work` runs;
 * the sockets' peers read while it runs. Recording to a file costs the traced processes far less than `perf trace`'s
 * live printing (which halved the rate on this machine).
 */
export async function traced<T>(
  pids: { server: number; device: number; client: number },
  file: string,
  work: () => Promise<T>,
  samplePeriodUs = 0,
): Promise<{ result: T; seg: Segments; attribution: Attribution[] }> {
  // With a sample period, the server's main thread is sampled too, by a perf of its own (cpu-clock, with call chains:
  // JS frames are named when the process runs with --perf-basic-prof); the two files share perf's clock.
  const list = [pids.server, pids.device, pids.client].join(',');
  const perfs: ChildProcess[] = [
    spawn('perf', ['record', '-q', '-m', '1024', '-e', EVENTS, '-o', file, '-p', list], { stdio: ['ignore', 'ignore', 'inherit'] }),
  ];
  if (samplePeriodUs > 0)
    perfs.push(
      spawn(
        'perf',
        ['record', '-q', '-m', '1024', '-e', 'cpu-clock', '-c', String(samplePeriodUs * 1000), '-g', '-o', `${file}.cpu`, '-t', String(pids.server)],
        {
          stdio: ['ignore', 'ignore', 'inherit'],
        },
      ),
    );
  await new Promise((r) => setTimeout(r, 1500));
  // The sockets are read once the load generator's connection is open (it closes when the work ends).
  // Twice, merged: a load generator slowed by the machine's load may open its connection late.
  const list3 = [pids.server, pids.device, pids.client];
  const snaps = [300, 1000].map((ms) => new Promise((r) => setTimeout(r, ms)).then(() => socketPeers(list3)));
  const result = await work();
  const m = new Map(list3.map((p) => [p, new Map<number, number>()]));
  for (const one of await Promise.all(snaps)) for (const [p, fds] of one) for (const [fd, peer] of fds) m.get(p)!.set(fd, peer);
  const peers = { server: m.get(pids.server)!, device: m.get(pids.device)!, client: m.get(pids.client)! };
  for (const pt of perfs) {
    const closed = new Promise((r) => pt.once('close', r));
    pt.kill('SIGINT');
    await closed;
  }
  const script = (f: string, fields: string) => spawnSync('perf', ['script', '-i', f, '-F', fields], { encoding: 'utf8', maxBuffer: 1 << 30 }).stdout;
  const { sys } = parsePerfScript(script(file, 'pid,tid,time,event,trace'));
  const samples = samplePeriodUs > 0 ? parsePerfScript(script(`${file}.cpu`, 'pid,tid,time,event,ip,sym,dso')).samples : [];
  if (samples.length > 0) renameJitFrames(samples, pids.server);
  const seg = segments(sys, pids, peers);
  if (process.env['SEGMENTS_DEBUG']) {
    const kinds = (m: Map<number, number>) => [...m.values()].reduce((o, p) => o.set(p, (o.get(p) ?? 0) + 1), new Map<number, number>());
    console.log(
      'segments debug',
      pids,
      'server peers',
      kinds(peers.server),
      'device peers',
      kinds(peers.device),
      'client peers',
      kinds(peers.client),
      'syscalls',
      sys.length,
      'server main',
      sys.filter((x) => x.tid === pids.server).length,
    );
  }
  return { result, seg, attribution: samplePeriodUs > 0 ? attribute(samples, seg.windows, pids.server, samplePeriodUs) : [] };
}
