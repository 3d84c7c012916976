import type { ComponentChildren } from 'preact';
import { tickFor, useNow } from './lib/clock.js';
import { prettyJson } from './lib/json-text.js';
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

/** Past this many lines a JSON block starts folded: its first lines show in the summary. */
const FOLD_LINES = 24;

/** A value as indented JSON; long ones fold (a click shows the rest). */
export function Json({ value }: { value: unknown }) {
  return <Folded text={JSON.stringify(value, null, 2) ?? String(value)} cls="json" />;
}

/** A tool's text: pretty-printed when it is JSON, as it came otherwise; long ones fold. */
export function ResultText({ text }: { text: string }) {
  const pretty = prettyJson(text);
  return <Folded text={pretty ?? text} cls={pretty === undefined ? 'text' : 'text json'} />;
}

function Folded({ text, cls }: { text: string; cls: string }) {
  const lines = text.split('\n');
  if (lines.length <= FOLD_LINES) return <pre class={cls}>{text}</pre>;
  return (
    <details class="fold">
      <summary>
        <code>{lines.slice(0, 3).join(' ').slice(0, 120)}</code> … <span class="muted small">({lines.length} lines: show all)</span>
      </summary>
      <pre class={cls}>{text}</pre>
    </details>
  );
}

/** A relative time that keeps moving ("3s ago", then "4s ago"), with the exact time as its tooltip. */
export function Ago({ iso }: { iso: string }) {
  const age = Date.now() - Date.parse(iso);
  const now = useNow(tickFor(Number.isFinite(age) ? age : 0));
  return (
    <time dateTime={iso} title={iso}>
      {ago(iso, now)}
    </time>
  );
}

/** Shown in place of a page or panel whose routes this gateway does not have (an older or smaller build). */
export function NotAvailable({ what }: { what: string }) {
  return (
    <p class="muted not-available" role="note">
      {what} is not available on this gateway.
    </p>
  );
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

/**
 * A device's status. While the event stream is down (stale), an "online" seen earlier may no longer be
 * true: it shows as unknown, with the last known state in its label.
 */
export function DeviceStatus({ online, state, stale }: { online: boolean; state: string; stale: boolean }) {
  const known = online ? (state === 'ready' ? 'online' : state) : 'offline';
  if (stale)
    return (
      <Badge tone="warn" title={`The event stream is down: last known ${known}`}>
        <span class="stale-status">unknown</span>
        <span class="small"> (was {known})</span>
      </Badge>
    );
  return online ? <Badge tone={state === 'ready' ? 'ok' : 'warn'}>{known}</Badge> : <Badge tone="off">offline</Badge>;
}

/**
 * Previous and Next over a cursor-paged listing: `cursors` are the cursors of the pages before this one (the last one
 * read this page), `next` the page's nextCursor.
 */
export function Pager({ cursors, next, onChange }: { cursors: string[]; next: string | undefined; onChange: (cursors: string[]) => void }) {
  return (
    <nav class="pager" aria-label="Pages">
      <button type="button" disabled={cursors.length === 0} onClick={() => onChange(cursors.slice(0, -1))}>
        Previous
      </button>
      <button type="button" disabled={!next} onClick={() => next && onChange([...cursors, next])}>
        Next
      </button>
    </nav>
  );
}
