export interface Series {
  name: string;
  /** A CSS class giving the line its colour (see style.css: .s0 … .s5). */
  tone: string;
  values: Array<number | null>;
}

const W = 320;
const H = 120;
const PAD = 4;

/**
 * A small line chart in SVG: a few series over the same time axis. Hand-drawn on purpose: the health
 * view needs three sparklines, not a charting library's weight in the bundle.
 */
export function LineChart({ title, unit, series }: { title: string; unit: string; series: Series[] }) {
  const n = Math.max(0, ...series.map((s) => s.values.length));
  const max = Math.max(1e-9, ...series.flatMap((s) => s.values.filter((v): v is number => v !== null)));
  const x = (i: number) => PAD + (n <= 1 ? 0 : (i * (W - 2 * PAD)) / (n - 1));
  const y = (v: number) => H - PAD - (v / max) * (H - 2 * PAD);
  const latest = series.map((s) => `${s.name} ${fmt(lastOf(s.values))}`).join(', ');
  return (
    <figure class="chart">
      <figcaption>
        {title}{' '}
        <span class="muted small">
          (max {fmt(max)} {unit})
        </span>
      </figcaption>
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={`${title}, latest: ${latest || 'no data'} ${unit}`} preserveAspectRatio="none">
        <line x1={PAD} x2={W - PAD} y1={H - PAD} y2={H - PAD} class="axis" />
        {series.map((s) => (
          <polyline key={s.name} class={`line ${s.tone}`} points={points(s.values, x, y)} />
        ))}
        {/* A point with no neighbour draws no line: show it as a dot. */}
        {series.flatMap((s) =>
          s.values.map((v, i) =>
            v !== null && (s.values[i - 1] ?? null) === null && (s.values[i + 1] ?? null) === null ? (
              <circle key={`${s.name}-${i}`} class={`dot ${s.tone}`} cx={x(i)} cy={y(v)} r={3} />
            ) : null,
          ),
        )}
      </svg>
      <ul class="legend">
        {series.map((s) => (
          <li key={s.name}>
            <span class={`swatch ${s.tone}`} aria-hidden="true" /> {s.name}: {fmt(lastOf(s.values))} {unit}
          </li>
        ))}
      </ul>
    </figure>
  );
}

function points(values: Array<number | null>, x: (i: number) => number, y: (v: number) => number): string {
  return values
    .map((v, i) => (v === null ? '' : `${x(i).toFixed(1)},${y(v).toFixed(1)}`))
    .filter(Boolean)
    .join(' ');
}

function lastOf(values: Array<number | null>): number | null {
  for (let i = values.length - 1; i >= 0; i--) if (values[i] !== null) return values[i]!;
  return null;
}

const fmt = (v: number | null) => (v === null ? '—' : v >= 100 ? String(Math.round(v)) : String(Math.round(v * 100) / 100));
