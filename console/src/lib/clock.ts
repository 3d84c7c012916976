import { useEffect, useState } from 'preact/hooks';

/**
 * One ticking clock for the page: every relative time ("12s ago") re-renders from it, so the times move
 * while nothing else changes. One interval however many times are shown; it stops when none is.
 */
const subscribers = new Set<(now: number) => void>();
let timer: ReturnType<typeof setInterval> | undefined;

function subscribe(f: (now: number) => void): () => void {
  subscribers.add(f);
  timer ??= setInterval(() => {
    const now = Date.now();
    for (const s of subscribers) s(now);
  }, 1000);
  return () => {
    subscribers.delete(f);
    if (subscribers.size === 0 && timer !== undefined) {
      clearInterval(timer);
      timer = undefined;
    }
  };
}

/** The current time, updated every second (or every `everyMs`, rounded to whole seconds) while mounted. */
export function useNow(everyMs = 1000): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    let last = Date.now();
    return subscribe((t) => {
      if (t - last < everyMs - 50) return;
      last = t;
      setNow(t);
    });
  }, [everyMs]);
  return now;
}

/** How often a relative time needs redrawing: every second under a minute, then every 30 s, then every 10 min. */
export function tickFor(ageMs: number): number {
  if (ageMs < 60_000) return 1000;
  if (ageMs < 3_600_000) return 30_000;
  return 600_000;
}
