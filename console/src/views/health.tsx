import { useEffect } from 'preact/hooks';
import { api } from '../lib/api.js';
import { useLoad } from '../lib/hooks.js';
import type { DeviceList, MetricHistory } from '../lib/types.js';
import { Badge, Loading, ProblemBox } from '../components.js';
import { LineChart, type Series } from '../chart.js';

/** Counts and the last hour's charts, from the samples the gateway keeps in memory (/v1/metrics/history). */
export function HealthView() {
  const history = useLoad((signal) => api<MetricHistory>('GET', '/v1/metrics/history', undefined, { signal }), []);
  const ready = useLoad((signal) => fetch('/readyz', { signal }).then((r) => r.ok), []);
  // One page of 1000 tells "how many" for most fleets; beyond that the count says "1000+".
  const known = useLoad((signal) => api<DeviceList>('GET', '/v1/devices?limit=1000', undefined, { signal }), []);
  const interval = Math.max(2000, history.data?.intervalMs ?? 10_000);
  useEffect(() => {
    const t = setInterval(() => (history.reload(), ready.reload(), known.reload()), interval);
    return () => clearInterval(t);
  }, [interval, history.reload, ready.reload, known.reload]);

  const samples = history.data?.samples ?? [];
  const last = samples[samples.length - 1];
  const outcomes = [...new Set(samples.flatMap((s) => Object.keys(s.callsPerSecond)))].sort();
  const transports = [...new Set(samples.flatMap((s) => Object.keys(s.devicesOnline)))].sort();
  const devices = known.data?.devices ?? [];
  const online = devices.filter((d) => d.online).length;
  const callSeries: Series[] = outcomes.map((o, i) => ({ name: o, tone: `s${i % 6}`, values: samples.map((s) => s.callsPerSecond[o] ?? 0) }));
  return (
    <section aria-labelledby="health-h">
      <h1 id="health-h">Health</h1>
      <dl class="counts">
        <div>
          <dt>Gateway</dt>
          <dd>{ready.data === undefined ? '…' : ready.data ? <Badge tone="ok">ready</Badge> : <Badge tone="bad">not ready</Badge>}</dd>
        </div>
        <div>
          <dt>Devices online</dt>
          <dd class="online-count">{known.data ? online : '…'}</dd>
        </div>
        <div>
          <dt>Devices known</dt>
          <dd>{known.data ? `${devices.length}${known.data.nextCursor ? '+' : ''}` : '…'}</dd>
        </div>
        <div>
          <dt>Events / s</dt>
          <dd>{last ? last.eventsPerSecond : '—'}</dd>
        </div>
      </dl>
      {history.problem && <ProblemBox problem={history.problem} />}
      {!history.data && history.loading && <Loading what="metrics" />}
      {history.data && samples.length === 0 && <p class="muted">The first sample comes {duration(history.data.intervalMs)} after start.</p>}
      {samples.length > 0 && (
        <div class="charts">
          <LineChart
            title="Device calls per second, by outcome"
            unit="/s"
            series={callSeries.length ? callSeries : [{ name: 'calls', tone: 's0', values: samples.map(() => 0) }]}
          />
          <LineChart title="Mean device-call latency" unit="ms" series={[{ name: 'latency', tone: 's1', values: samples.map((s) => s.callLatencyMs) }]} />
          <LineChart
            title="Devices online, by transport"
            unit=""
            series={transports.map((t, i) => ({ name: t, tone: `s${(i + 2) % 6}`, values: samples.map((s) => s.devicesOnline[t] ?? 0) }))}
          />
        </div>
      )}
      <p class="muted small">
        {history.data && `One sample every ${duration(history.data.intervalMs)}, the last ${history.data.capacity} kept in the gateway's memory. `}
        Full series: <code>/metrics</code> (Prometheus).
      </p>
    </section>
  );
}

const duration = (ms: number) => (ms < 1000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`);
