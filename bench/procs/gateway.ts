/**
 * The gateway exactly as `gateway/src/main.ts` starts it (configuration from GATEWAY_* variables), plus
 * the bench's memory probe. Nothing in gateway/src is bench-aware.
 */
import { serveMemoryProbe } from './ipc.js';

serveMemoryProbe();
await import('../../gateway/src/main.js');
