import { hasDotSegment } from './api-path.js';
import type { Problem } from './types.js';

const KEY = 'voxgate.apiKey';

/** The API key lives in sessionStorage only: gone when the tab closes, never in a URL or a cookie. */
export const session = {
  key(): string | null {
    return sessionStorage.getItem(KEY);
  },
  signIn(key: string): void {
    sessionStorage.setItem(KEY, key);
  },
  signOut(): void {
    sessionStorage.removeItem(KEY);
    for (const f of signedOutListeners) f();
  },
};
const signedOutListeners = new Set<() => void>();
export function onSignedOut(f: () => void): () => void {
  signedOutListeners.add(f);
  return () => signedOutListeners.delete(f);
}

/** A problem+json answer (or a network failure dressed as one), with the API's stable code. */
export class ApiError extends Error {
  constructor(readonly problem: Problem) {
    super(`${problem.code}: ${problem.detail}`);
  }
}

export function authHeaders(key = session.key()): Record<string, string> {
  return key ? { authorization: `Bearer ${key}` } : {};
}

/** Call the public API with the session's key. A 401 signs the page out. */
export async function api<T>(method: string, path: string, body?: unknown, opts: { key?: string; signal?: AbortSignal } = {}): Promise<T> {
  if (hasDotSegment(path)) throw new ApiError({ type: 'about:blank', title: 'Bad path', status: 0, detail: 'a "." or ".." is not an id', code: 'BAD_PATH' });
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers: { accept: 'application/json', ...authHeaders(opts.key ?? session.key()), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? null : JSON.stringify(body),
      signal: opts.signal ?? null,
    });
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e;
    throw new ApiError({ type: 'about:blank', title: 'Network error', status: 0, detail: 'the gateway did not answer; is it running?', code: 'NETWORK' });
  }
  if (!res.ok) {
    if (res.status === 401 && opts.key === undefined) session.signOut();
    throw new ApiError(await problemOfResponse(res));
  }
  const text = await res.text();
  return (text ? safeJson(text) : {}) as T;
}

/** The problem+json of a failed answer; anything else (a proxy's HTML page) as HTTP_<status>. */
export async function problemOfResponse(res: Response): Promise<Problem> {
  const text = await res.text().catch(() => '');
  const parsed = text ? safeJson(text) : undefined;
  return isProblem(parsed)
    ? parsed
    : { type: 'about:blank', title: res.statusText, status: res.status, detail: text.slice(0, 300), code: `HTTP_${res.status}` };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function isProblem(v: unknown): v is Problem {
  return typeof v === 'object' && v !== null && typeof (v as Problem).code === 'string' && typeof (v as Problem).detail === 'string';
}

/** A device id in a path: colons are fine in a path segment, but encode anyway. */
export const devicePath = (id: string) => `/v1/devices/${encodeURIComponent(id)}`;
