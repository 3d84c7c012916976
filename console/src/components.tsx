import type { ComponentChildren } from 'preact';
import { explain } from './lib/problems.js';
import type { Problem } from './lib/types.js';

/** A problem as the API reported it: code, detail, and what the code means. */
export function ProblemBox({ problem, label }: { problem: Problem; label?: string }) {
  return (
    <div class="problem" role="alert" data-code={problem.code}>
      <strong>
        {label ? `${label}: ` : ''}
        <code>{problem.code}</code> {problem.title}
      </strong>
      {problem.detail && <p class="detail">{problem.detail}</p>}
      <p class="explain">{explain(problem.code)}</p>
    </div>
  );
}

export function Badge({ tone, title, children }: { tone: 'ok' | 'off' | 'warn' | 'bad' | 'info'; title?: string | undefined; children: ComponentChildren }) {
  return (
    <span class={`badge ${tone}`} title={title}>
      {children}
    </span>
  );
}

/** A device that refused part of its tool list for good: it works with the tools before the refused one. */
export function CatalogWarning({ warning }: { warning: string | undefined }) {
  if (!warning) return null;
  return (
    <Badge tone="warn" title={warning}>
      catalog incomplete
    </Badge>
  );
}

export function Json({ value }: { value: unknown }) {
  return <pre class="json">{JSON.stringify(value, null, 2)}</pre>;
}

export function ago(iso: string, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (!Number.isFinite(s)) return '';
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86_400)}d ago`;
}

export function Loading({ what }: { what: string }) {
  return (
    <p class="muted" aria-live="polite">
      Loading {what}…
    </p>
  );
}
