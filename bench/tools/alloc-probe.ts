/**
 * Plain JavaScript preloaded into a measured process (`--import` of `ALLOC_PROBE_URL`, before tsx), so the gateway and
 * a bare floor are measured the same way. `{cmd:'alloc-start', sample}` starts counting garbage collections (by kind,
 * with their pause time) and, with `sample`, V8's sampling heap profiler with the objects the young and the old collections freed kept in
 * the profile (so it counts what was allocated, not what survived; with `survivors`, what the young collections freed is
 * left out: what they copied or promoted, i.e. what lived across one); `{cmd:'alloc-stop', top}` answers the counts, the
 * estimated bytes allocated in the window, and the `top` allocation sites by bytes (function, file:line).
 */
const PROBE_JS = `import { Session } from 'node:inspector';
import { PerformanceObserver, constants } from 'node:perf_hooks';
import { getHeapSpaceStatistics } from 'node:v8';
let session, gc, observer, old0;
const oldUsed = () => getHeapSpaceStatistics().find((s) => s.space_name === 'old_space').space_used_size;
const post = (m, p = {}) => new Promise((ok, no) => session.post(m, p, (e, r) => (e ? no(e) : ok(r))));
const kinds = { [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor', [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental', [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb' };
process.on('message', async (m) => {
  if (m.cmd === 'alloc-start') {
    gc = {};
    old0 = oldUsed();
    observer = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        const k = kinds[e.detail?.kind ?? e.kind] ?? 'other';
        const g = (gc[k] ??= { count: 0, ms: 0 });
        g.count++;
        g.ms += e.duration;
      }
    });
    observer.observe({ entryTypes: ['gc'] });
    if (!m.sample) return process.send({ id: m.id, ok: true });
    session = new Session();
    session.connect();
    await post('HeapProfiler.enable');
    await post('HeapProfiler.startSampling', { samplingInterval: m.interval ?? 4096,
      includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: !m.survivors });
    return process.send({ id: m.id, ok: true });
  }
  if (m.cmd !== 'alloc-stop') return;
  observer.disconnect();
  const oldGrowth = oldUsed() - old0;
  if (!session) return process.send({ id: m.id, ok: true, gc, oldGrowth, bytes: 0, top: [] });
  const { profile } = await post('HeapProfiler.stopSampling');
  await post('HeapProfiler.disable');
  session.disconnect();
  session = undefined;
  const sites = new Map();
  let bytes = 0;
  const walk = (n, path) => {
    const f = n.callFrame;
    const here = (f.functionName || '(anonymous)') + ' ' + f.url.replace(/^.*\\/(node_modules|gateway|protocol|bench|test)\\//, '$1/') + ':' + (f.lineNumber + 1);
    if (n.selfSize > 0) {
      bytes += n.selfSize;
      const key = here + '  <  ' + path;
      sites.set(key, (sites.get(key) ?? 0) + n.selfSize);
    }
    for (const c of n.children) walk(c, here);
  };
  walk(profile.head, '');
  const top = [...sites].sort((a, b) => b[1] - a[1]).slice(0, m.top ?? 25);
  process.send({ id: m.id, ok: true, gc, oldGrowth, bytes, top });
});`;

export const ALLOC_PROBE_URL = `data:text/javascript,${encodeURIComponent(PROBE_JS)}`;
