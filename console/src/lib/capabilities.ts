import { useEffect, useState } from 'preact/hooks';
import { ApiError } from './api.js';
import { capabilitiesOf, type Capabilities, type OpenApiDoc } from './routes-of.js';

export type { Capabilities };

/**
 * Which routes this gateway has, from its own /openapi.json (open, like the docs): pages for routes a build
 * lacks say "not available on this gateway" instead of failing. Read once per page load. When the document
 * cannot be read, every route is taken as present and a 404 from the route itself says the same.
 */
let loaded: Promise<Capabilities> | undefined;
export function capabilities(): Promise<Capabilities> {
  loaded ??= fetch('/openapi.json', { headers: { accept: 'application/json' } })
    .then((r) => (r.ok ? (r.json() as Promise<OpenApiDoc>) : undefined))
    .catch(() => undefined)
    .then(capabilitiesOf);
  return loaded;
}

/** The gateway's capabilities once read (undefined while the document loads). */
export function useCapabilities(): Capabilities | undefined {
  const [caps, setCaps] = useState<Capabilities>();
  useEffect(() => {
    let live = true;
    void capabilities().then((c) => live && setCaps(c));
    return () => {
      live = false;
    };
  }, []);
  return caps;
}

/** A 404 from the router itself ("no route GET /v1/jobs"): the route does not exist on this gateway, unlike a 404 for a missing job. */
export function isMissingRoute(e: unknown): boolean {
  return e instanceof ApiError && e.problem.status === 404 && e.problem.code === 'NOT_FOUND' && e.problem.detail.startsWith('no route ');
}
