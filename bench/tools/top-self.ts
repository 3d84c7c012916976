/**
 * Print the top self-time functions of a V8 .cpuprofile (from `node --cpu-prof`).
 *   npx tsx bench/tools/top-self.ts <file.cpuprofile> [count] [fromS-toS] [--timeline]
 * Self time = samples whose top frame is the function; grouped by function, file and line.
 * fromS-toS: only the samples between those seconds after the profile's start (e.g. the measured rows,
 * without the start-up's module loading); --timeline prints the busy share of each second to find them.
 */
import { readFileSync } from 'node:fs';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const args = process.argv.slice(2);
const timeline = args.includes('--timeline');
const [file, countArg, windowArg] = args.filter((a) => a !== '--timeline');
if (!file) {
  process.stderr.write('usage: top-self.ts <file.cpuprofile> [count]\n');
  process.exit(2);
}
const prof = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const [fromS, toS] = windowArg ? windowArg.split('-').map(Number) : [0, Infinity];
const idleId = prof.nodes.find((n) => n.callFrame.functionName === '(idle)')?.id;
const selfUs = new Map<number, number>();
const perSecond: { busy: number; all: number }[] = [];
let at = 0;
for (let i = 0; i < prof.samples.length; i++) {
  const id = prof.samples[i]!;
  const dt = prof.timeDeltas[i] ?? 0;
  at += dt;
  const s = Math.floor(at / 1e6);
  const slot = (perSecond[s] ??= { busy: 0, all: 0 });
  slot.all += dt;
  if (id !== idleId) slot.busy += dt;
  if (at / 1e6 < fromS! || at / 1e6 >= toS!) continue;
  selfUs.set(id, (selfUs.get(id) ?? 0) + dt);
}
if (timeline) process.stdout.write(`busy share per second: ${perSecond.map((x, i) => `${i}:${x ? Math.round((x.busy / x.all) * 100) : 0}`).join(' ')}\n`);
const grouped = new Map<string, number>();
let total = 0;
for (const [id, us] of selfUs) {
  const f = byId.get(id)!.callFrame;
  const where = f.url ? `${f.url.replace(/^file:\/\/.*?node_modules\//, 'nm/').replace(/^file:\/\/.*?\/main\//, '')}:${f.lineNumber + 1}` : '';
  const key = `${f.functionName || '(anonymous)'}  ${where}`;
  grouped.set(key, (grouped.get(key) ?? 0) + us);
  total += us;
}
const idle = [...grouped].filter(([k]) => k.startsWith('(idle)')).reduce((n, [, v]) => n + v, 0);
const rows = [...grouped].sort((a, b) => b[1] - a[1]).slice(0, Number(countArg ?? 30));
process.stdout.write(`total ${(total / 1e3).toFixed(0)} ms sampled, idle ${((idle / total) * 100).toFixed(1)}%\n`);
process.stdout.write('  self ms   self%  (of busy)  function  file:line\n');
for (const [k, us] of rows) {
  process.stdout.write(
    `${(us / 1e3).toFixed(1).padStart(9)}  ${((us / total) * 100).toFixed(1).padStart(5)}%  ${(k.startsWith('(idle)') ? '' : ((us / (total - idle)) * 100).toFixed(1) + '%').padStart(9)}  ${k}\n`,
  );
}

// Also by package/file: where the busy time goes.
const byFile = new Map<string, number>();
for (const [id, us] of selfUs) {
  const f = byId.get(id)!.callFrame;
  if (f.functionName === '(idle)') continue;
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(f.url);
  const key = m ? m[1]! : f.url ? f.url.replace(/^file:\/\/.*?\/main\//, '') : `(${f.functionName || 'native'})`;
  byFile.set(key, (byFile.get(key) ?? 0) + us);
}
process.stdout.write('\nby package / file (busy time):\n');
for (const [k, us] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, 20))
  process.stdout.write(`${((us / (total - idle)) * 100).toFixed(1).padStart(6)}%  ${k}\n`);
