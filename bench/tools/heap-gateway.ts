/**
 * The bench's gateway (bench/procs/gateway.ts) plus `{cmd:'snapshot', file}`: a heap snapshot written after
 * forced garbage collections. Started by bench/tools/fleet-heap.ts only.
 */
import { writeHeapSnapshot } from 'node:v8';
import { serveMemoryProbe } from '../procs/ipc.js';

serveMemoryProbe();
process.on('message', (m: { id: number; cmd: string; file?: string }) => {
  if (m.cmd !== 'snapshot' || !m.file) return;
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  gc?.();
  writeHeapSnapshot(m.file);
  process.send?.({ id: m.id, ok: true, mem: process.memoryUsage() });
});
await import('../../gateway/src/main.js');
