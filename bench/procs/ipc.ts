/**
 * The bench side of a measured process: answers `{cmd:'mem'}` over IPC with `process.memoryUsage()`
 * taken after forced garbage collections (the process runs with --expose-gc), and exits when the runner
 * goes away, so no process outlives the run. `{cmd:'count'}` answers the extra fields without a GC.
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
    process.send?.({ id: m.id, ok: true, gc: gc !== undefined, mem: process.memoryUsage(), ...extra() });
  });
  process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));
}
