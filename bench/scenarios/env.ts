/** The processes a scenario drives: the gateway, the floors, and the fleet processes holding simulated devices. */
import type { Proc, Reply } from '../lib/procs.js';

export class Fleet {
  constructor(readonly procs: Proc[]) {}

  /** Connect `count` devices of one group, split over the fleet processes. */
  async connect(o: {
    group: string;
    mode: 'device' | 'bare';
    waitFor: 'ready' | 'open';
    transport: 'ws' | 'mqtt';
    url: string;
    count: number;
    macGroup: number;
    sources: string[];
    timeoutMs: number;
  }) {
    const procs = this.procs.slice(0, Math.max(1, Math.min(this.procs.length, Math.ceil(o.count / 50))));
    const per = Math.ceil(o.count / procs.length);
    const replies = await Promise.all(
      procs.map((p, i) => {
        const first = i * per;
        const count = Math.max(0, Math.min(per, o.count - first));
        return p.request({ cmd: 'connect', ...o, first, count, inflight: 128 }, o.timeoutMs + 10_000);
      }),
    );
    return this.sum(replies, procs.length);
  }

  async storm(group: string, timeoutMs: number) {
    const replies = await Promise.all(
      this.procs.map((p) => p.request({ cmd: 'storm', group, timeoutMs }, timeoutMs + 10_000).catch((e: Error) => ({ id: 0, ok: false, error: e.message }))),
    );
    return this.sum(
      replies.filter((r) => !(r.error ?? '').includes('no group')),
      this.procs.length,
    );
  }

  async close(group: string) {
    await Promise.all(this.procs.map((p) => p.request({ cmd: 'close', group }, 30_000)));
  }

  /** A full collection in every fleet process: the garbage of the groups closed before stays out of the next window. */
  async gc() {
    await Promise.all(this.procs.map((p) => p.request({ cmd: 'gc' }, 30_000)));
  }

  private sum(replies: Reply[], _n: number) {
    const stats = { open: 0, ready: 0, calls: 0, connectRetries: 0, connectFailures: 0, droppedFrames: 0, unknownTools: 0 };
    let ok = true;
    for (const r of replies) {
      ok &&= r.ok;
      const s = (r['stats'] ?? {}) as Record<string, number>;
      for (const k of Object.keys(stats) as Array<keyof typeof stats>) stats[k] += s[k] ?? 0;
    }
    return { ok, stats };
  }
}

export interface Env {
  gateway: Proc;
  gwUrl: string;
  gwMqtt: string;
  wsRelay: Proc;
  mqttRelay: Proc;
  bareWs: Proc;
  fleet: Fleet;
  sources: string[];
  fleetN: number;
  fleetParams: Record<string, unknown>;
}
