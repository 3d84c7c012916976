/**
 * Turning whatever a provider throws into a ProviderError with a stable code and a message safe to show and log:
 * no API key, no URL query, bounded length.
 */
import { APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import { ProviderError } from '../contracts.js';

const MAX_MESSAGE = 200;

/** Removes anything key-like and every URL's query from text that came from a server or a library. */
export function safeText(text: string, secrets: ReadonlyArray<string | undefined> = []): string {
  let s = text;
  for (const secret of secrets) if (secret && secret.length >= 4) s = s.split(secret).join('[redacted]');
  s = s
    .replace(/\b(sk|gsk|pk|rk)-[A-Za-z0-9_*-]{6,}/g, '[redacted]')
    .replace(/(bearer\s+)\S+/gi, '$1[redacted]')
    .replace(/(https?|wss?):\/\/[^\s?#"']+\?[^\s#"']*/g, (m) => m.slice(0, m.indexOf('?')))
    .replace(/\s+/g, ' ')
    .trim();
  return s.length > MAX_MESSAGE ? `${s.slice(0, MAX_MESSAGE - 1)}…` : s;
}

export interface Deadline {
  signal: AbortSignal;
  /** Why the signal fired: the caller's abort or our timeout. */
  reason(): 'aborted' | 'timeout' | undefined;
  /** Start the timeout over (an idle timeout between streamed chunks). */
  touch(): void;
  /** Stop the clock while the consumer holds a chunk (a paced consumer is not a slow provider); touch() restarts it. */
  pause(): void;
  clear(): void;
}

/** The caller's signal combined with a timeout of our own, telling apart which of the two fired. */
export function deadline(caller: AbortSignal, timeoutMs: number): Deadline {
  const ctl = new AbortController();
  let why: 'aborted' | 'timeout' | undefined;
  const onAbort = (): void => {
    why ??= 'aborted';
    ctl.abort();
  };
  let timer: NodeJS.Timeout | undefined;
  const arm = (): void => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      why ??= 'timeout';
      ctl.abort();
    }, timeoutMs);
    timer.unref?.();
  };
  if (caller.aborted) onAbort();
  else {
    caller.addEventListener('abort', onAbort, { once: true });
    arm();
  }
  return {
    signal: ctl.signal,
    reason: () => why,
    touch: () => {
      if (!why) arm();
    },
    pause: () => {
      if (timer) clearTimeout(timer);
    },
    clear: () => {
      if (timer) clearTimeout(timer);
      caller.removeEventListener('abort', onAbort);
    },
  };
}

/** Any failure → ProviderError; `what` names the request ("transcription", "speech"). */
export function toProviderError(
  err: unknown,
  provider: string,
  what: string,
  d: Deadline | undefined,
  secrets: ReadonlyArray<string | undefined> = [],
): ProviderError {
  if (err instanceof ProviderError) return err;
  const why = d?.reason();
  if (why === 'timeout') return new ProviderError('timeout', `${what} timed out`, provider);
  if (why === 'aborted' || err instanceof APIUserAbortError) return new ProviderError('aborted', `${what} cancelled`, provider);
  if (err instanceof APIConnectionTimeoutError) return new ProviderError('timeout', `${what} timed out`, provider);
  if (err instanceof APIError && err.status !== undefined) {
    const detail = safeText(typeof err.error === 'object' && err.error && 'message' in err.error ? String(err.error.message) : '', secrets);
    return new ProviderError('http', `${what} failed: HTTP ${err.status}${detail ? ` (${detail})` : ''}`, provider);
  }
  const message = err instanceof Error ? err.message : String(err);
  return new ProviderError('network', `${what} failed: ${safeText(message, secrets)}`, provider);
}
