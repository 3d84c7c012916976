/**
 * Plain JavaScript loaded into the measured gateway (compiled or from sources): answers
 * `{cmd:'snapshot', file}` with a heap snapshot after forced garbage collections, and `{cmd:'profile'}`
 * by starting a CPU profile (inspector), or, when one runs, writing it to `file`: only the window between
 * the two is profiled (not the start-up, nor the snapshots). `{cmd:'now'}`: the gateway's performance.now() (ms from its
 * start, within a few ms of the origin of V8's log times), to place a window in that log.
 */
export const PROBE_JS = `import { writeHeapSnapshot } from 'node:v8';
import { Session } from 'node:inspector';
import { writeFileSync } from 'node:fs';
let profiling;
const post = (s, m, p = {}) => new Promise((ok, no) => s.post(m, p, (e, r) => (e ? no(e) : ok(r))));
process.on('message', async (m) => {
  if (m.cmd === 'snapshot') {
    globalThis.gc(); globalThis.gc();
    writeHeapSnapshot(m.file);
    return process.send({ id: m.id, ok: true, mem: process.memoryUsage() });
  }
  if (m.cmd === 'now') return process.send({ id: m.id, ok: true, now: performance.now() });
  if (m.cmd !== 'profile') return;
  if (!profiling) {
    profiling = new Session();
    profiling.connect();
    await post(profiling, 'Profiler.enable');
    await post(profiling, 'Profiler.setSamplingInterval', { interval: 200 });
    await post(profiling, 'Profiler.start');
    return process.send({ id: m.id, ok: true });
  }
  const { profile } = await post(profiling, 'Profiler.stop');
  profiling.disconnect();
  profiling = undefined;
  writeFileSync(m.file, JSON.stringify(profile));
  process.send({ id: m.id, ok: true });
});
process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));`;
