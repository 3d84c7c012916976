import { getHeapSpaceStatistics } from 'node:v8';

/**
 * The bench side of a measured process: answers `{cmd:'mem'}` over IPC with `process.memoryUsage()`
 * taken after forced garbage collections (the process runs with --expose-gc), with `young`, the bytes V8's
 * young generation holds committed (it grows from 1 to 32 MiB with allocation, whatever the process keeps), and
 * exits when the runner goes away, so no process outlives the run. `{cmd:'count'}` answers the extra fields without a GC.
 */
export function serveMemoryProbe(extra: () => Record<string, unknown> = () => ({})): void {
  process.on('message', (m: { id: number; cmd: string }) => {
    if (m.cmd === 'count') return void process.send?.({ id: m.id, ok: true, ...extra() });
    if (m.cmd !== 'mem') return;
    const gc = (globalThis as { gc?: () => void }).gc;
    if (gc) {
      gc();
      gc();
    }
    const young = getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size;
    process.send?.({ id: m.id, ok: true, gc: gc !== undefined, mem: process.memoryUsage(), young, ...extra() });
  });
  process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));
}

/**
 * The gateway's probe (serveMemoryProbe without extra fields) as plain JavaScript, for a gateway run
 * compiled: `node --expose-gc --import <MEMORY_PROBE_IMPORT> gateway/dist/main.js` loads it before the
 * gateway, so nothing in gateway/src is bench-aware and no TypeScript loader sits in the measured process.
 * `extra` is an expression of the fields both answers add.
 */
const probeJs = (extra: string) => `import { getHeapSpaceStatistics } from 'node:v8';
process.on('message', (m) => {
  if (m.cmd === 'count') return void process.send?.({ id: m.id, ok: true, ...${extra} });
  if (m.cmd !== 'mem') return;
  const gc = globalThis.gc;
  if (gc) { gc(); gc(); }
  const young = getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size;
  process.send?.({ id: m.id, ok: true, gc: gc !== undefined, mem: process.memoryUsage(), young, ...${extra} });
});
process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));`;

export const MEMORY_PROBE_IMPORT = `data:text/javascript,${encodeURIComponent(probeJs('{}'))}`;

/**
 * The same probe for a peer's process (78/xiaozhi-mqtt-gateway, bench/lib/mqtt-gateway-peer.ts), whose sessions the
 * bench cannot ask about: `devices` is its open TCP sockets (devices' MQTT connections and its voice-server
 * WebSockets), so the bench can wait until a run's sessions have all closed.
 */
export const PEER_PROBE_IMPORT = `data:text/javascript,${encodeURIComponent(
  probeJs("{ devices: process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length }"),
)}`;
