import type { Logger } from 'pino';
import type { Metrics } from './metrics.js';

/** One point of the health charts: rates over the interval that ended at `at`, gauges as read at `at`. */
export interface MetricSample {
  at: string;
  /** Devices connected now, by transport. */
  devicesOnline: Record<string, number>;
  /** Device calls per second over the interval, by outcome. */
  callsPerSecond: Record<string, number>;
  /** Mean device-call latency over the interval; null when no call finished. */
  callLatencyMs: number | null;
  eventsPerSecond: number;
}

interface Totals {
  atMs: number;
  calls: Map<string, number>;
  latencySum: number;
  latencyCount: number;
  events: number;
}

/**
 * A ring of metric samples kept in memory, so the console can chart the last hour without a Prometheus
 * server. Fixed size (`capacity`), one sample per `intervalMs`: its memory never grows with traffic.
 */
export class MetricsHistory {
  private readonly ring: MetricSample[] = [];
  private last: Totals | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly metrics: Metrics,
    readonly intervalMs: number,
    readonly capacity: number,
    private readonly now: () => number = Date.now,
    private readonly log?: Logger,
  ) {}

  start(): void {
    if (this.timer) return;
    // A failed reading skips one sample; it never becomes an unhandled rejection.
    const tick = () => void this.sample().catch((err: unknown) => this.log?.warn({ err }, 'metrics history: sample failed'));
    // The first reading is the baseline the first sample's rates are measured against.
    tick();
    this.timer = setInterval(tick, this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Samples, oldest first. */
  samples(): readonly MetricSample[] {
    return this.ring;
  }

  /** Read the metrics; add a sample when there is a previous reading to compare with. */
  async sample(): Promise<MetricSample | undefined> {
    const totals = await this.read();
    const prev = this.last;
    this.last = totals;
    if (!prev) return undefined;
    const seconds = Math.max(0.001, (totals.atMs - prev.atMs) / 1000);
    const callsPerSecond: Record<string, number> = {};
    for (const [outcome, n] of totals.calls) {
      const delta = n - (prev.calls.get(outcome) ?? 0);
      if (delta > 0) callsPerSecond[outcome] = round(delta / seconds);
    }
    const count = totals.latencyCount - prev.latencyCount;
    const sample: MetricSample = {
      at: new Date(totals.atMs).toISOString(),
      devicesOnline: await this.devicesOnline(),
      callsPerSecond,
      callLatencyMs: count > 0 ? round(((totals.latencySum - prev.latencySum) / count) * 1000) : null,
      eventsPerSecond: round(Math.max(0, totals.events - prev.events) / seconds),
    };
    this.ring.push(sample);
    if (this.ring.length > this.capacity) this.ring.splice(0, this.ring.length - this.capacity);
    return sample;
  }

  private async read(): Promise<Totals> {
    const atMs = this.now();
    const calls = new Map<string, number>();
    for (const v of (await this.metrics.calls.get()).values) calls.set(String(v.labels.outcome ?? 'unknown'), v.value);
    let latencySum = 0;
    let latencyCount = 0;
    for (const v of (await this.metrics.callDuration.get()).values) {
      if (v.metricName === 'voxgate_call_duration_seconds_sum') latencySum += v.value;
      else if (v.metricName === 'voxgate_call_duration_seconds_count') latencyCount += v.value;
    }
    const events = (await this.metrics.events.get()).values.reduce((sum, v) => sum + v.value, 0);
    return { atMs, calls, latencySum, latencyCount, events };
  }

  /**
   * Made with its values rather than filled in: `{ websocket, mqtt }` is the shape of the metrics' per-transport tables
   * (metrics.ts `hot`), and V8 compiles the device paths' reads of those as constants until some object of that shape
   * has a field written again. Filling this object in did that on the sampler's first tick, and the optimized code of
   * every frame and connect was thrown away mid-fleet (docs/performance.md, "fleetjit").
   */
  private async devicesOnline(): Promise<Record<string, number>> {
    const values = (await this.metrics.devicesConnected.get()).values;
    const of = (transport: string) => values.find((v) => String(v.labels.transport ?? 'unknown') === transport)?.value ?? 0;
    const out: Record<string, number> = { websocket: of('websocket'), mqtt: of('mqtt') };
    for (const v of values) {
      const transport = String(v.labels.transport ?? 'unknown');
      if (transport !== 'websocket' && transport !== 'mqtt') out[transport] = v.value;
    }
    return out;
  }
}

const round = (n: number) => Math.round(n * 1000) / 1000;
