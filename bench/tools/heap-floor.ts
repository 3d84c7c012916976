/**
 * The fleet floor (bench/floors/bare-ws.ts) plus heap-probe.ts's `{cmd:'snapshot', file}`: started by
 * bench/tools/fleet-heap.ts --floor, so the floor's objects per ready device can be set beside the gateway's.
 */
import { PROBE_JS } from './heap-probe.js';

await import(`data:text/javascript,${encodeURIComponent(PROBE_JS)}`);
await import('../floors/bare-ws.js');
