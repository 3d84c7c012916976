import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.js';
import { events } from './events.js';
import type { GatewayEvent, Problem } from './types.js';

/** Re-render on every event and status change of the page's event stream. */
export function useStreamState(): typeof events {
  const [, setTick] = useState(0);
  useEffect(() => events.subscribe(() => setTick((n) => n + 1)), []);
  return events;
}

/**
 * Whether what the page shows of devices may be stale (the event stream down, paused or reconnecting), and
 * `onFresh` run each time the stream is live again after that (reload: what changed meanwhile was not seen).
 */
export function useStale(onFresh?: () => void): boolean {
  // Only status changes re-render (not every event): the devices table listens to this.
  const [stale, setStale] = useState(() => events.stale);
  useEffect(() => events.subscribe((e) => e === 'status' && setStale(events.stale)), []);
  const was = useRef(stale);
  const fresh = useRef(onFresh);
  fresh.current = onFresh;
  useEffect(() => {
    if (was.current && !stale) fresh.current?.();
    was.current = stale;
  }, [stale]);
  return stale;
}

/** Run `f` for each event (and on `resync`), while mounted. */
export function useOnEvent(f: (e: GatewayEvent | 'resync') => void): void {
  const ref = useRef(f);
  ref.current = f;
  useEffect(() => events.subscribe((e) => e !== 'status' && ref.current(e)), []);
}

export interface Loaded<T> {
  data: T | undefined;
  problem: Problem | undefined;
  loading: boolean;
  reload: () => void;
}

/** Load from the API; a newer load cancels an older one; problems are kept for display, never thrown. */
export function useLoad<T>(load: (signal: AbortSignal) => Promise<T>, deps: unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data?: T; problem?: Problem; loading: boolean }>({ loading: true });
  const [gen, setGen] = useState(0);
  useEffect(() => {
    const abort = new AbortController();
    setState((s) => ({ ...s, loading: true }));
    load(abort.signal).then(
      (data) => !abort.signal.aborted && setState({ data, loading: false }),
      (e: unknown) => {
        if (abort.signal.aborted) return;
        setState((s) => ({ ...s, problem: problemOf(e), loading: false }));
      },
    );
    return () => abort.abort();
  }, [...deps, gen]);
  const reload = useCallback(() => setGen((g) => g + 1), []);
  return { data: state.data, problem: state.problem, loading: state.loading, reload };
}

export function problemOf(e: unknown): Problem {
  if (e instanceof ApiError) return e.problem;
  return { type: 'about:blank', title: 'Error', status: 0, code: 'CLIENT', detail: e instanceof Error ? e.message : String(e) };
}

/** A form's own check failing before anything is sent. */
export interface Invalid {
  invalid: string;
}

export interface Action<Own = never> {
  busy: boolean;
  problem: Problem | Own | undefined;
  /** Show a problem found before sending (or clear it with undefined). */
  setProblem: (p: Problem | Own | undefined) => void;
  /** Run one API action: busy while it runs, the last problem cleared first and kept if it fails, never thrown. */
  run: (f: () => Promise<unknown>) => Promise<void>;
}

/** A button's or form's API action: busy state and the problem to show (`Own`: the form's own kinds, e.g. Invalid). */
export function useAction<Own = never>(): Action<Own> {
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<Problem | Own>();
  const run = useCallback(async (f: () => Promise<unknown>) => {
    setBusy(true);
    setProblem(undefined);
    try {
      await f();
    } catch (err) {
      setProblem(problemOf(err));
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, problem, setProblem, run };
}

/** Call `f` at most once per `ms`, trailing: many events in a burst make one reload. */
export function useCoalesced(f: () => void, ms: number): () => void {
  const ref = useRef(f);
  ref.current = f;
  const timer = useRef<ReturnType<typeof setTimeout>>();
  useEffect(() => () => clearTimeout(timer.current), []);
  return useCallback(() => {
    if (timer.current !== undefined) return;
    timer.current = setTimeout(() => {
      timer.current = undefined;
      ref.current();
    }, ms);
  }, [ms]);
}

/** Run `f` every `ms` while mounted (for what changes without an event, e.g. a tool process connecting). */
export function useInterval(f: () => void, ms: number): void {
  const ref = useRef(f);
  ref.current = f;
  useEffect(() => {
    const t = setInterval(() => ref.current(), ms);
    return () => clearInterval(t);
  }, [ms]);
}
