/**
 * The bench's gateway (bench/procs/gateway.ts) plus `{cmd:'snapshot', file}` (a heap snapshot written after
 * forced garbage collections) and `{cmd:'profile', file}` (starts a CPU profile; the next one writes it to
 * `file`). Started by bench/tools/fleet-heap.ts only; its --dist mode loads the same code as PROBE_JS.
 */
import { serveMemoryProbe } from '../procs/ipc.js';
import { PROBE_JS } from './heap-probe.js';

serveMemoryProbe();
await import(`data:text/javascript,${encodeURIComponent(PROBE_JS)}`);
await import('../../gateway/src/main.js');
