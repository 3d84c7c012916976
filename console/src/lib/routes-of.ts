/** The routes a gateway has, read from its /openapi.json. No DOM: unit-tested in Node. */
export interface OpenApiDoc {
  paths?: Record<string, Record<string, { parameters?: Array<{ name?: unknown; in?: unknown }> }>>;
}

export interface Capabilities {
  has(method: string, path: string): boolean;
  /** Query parameters a route accepts (empty when unknown). */
  query(method: string, path: string): ReadonlySet<string>;
}

export function capabilitiesOf(doc: OpenApiDoc | undefined): Capabilities {
  const paths = doc?.paths;
  if (!paths) return { has: () => true, query: () => new Set() };
  // Path parameters by position, not by name: /v1/calls/{id} and /v1/calls/{callId} are one route.
  const shape = (path: string) => path.replace(/\{[^}]*\}/g, '{}');
  const byShape = new Map(Object.entries(paths).map(([path, ops]) => [shape(path), ops]));
  const op = (method: string, path: string) => byShape.get(shape(path))?.[method.toLowerCase()];
  return {
    has: (method, path) => op(method, path) !== undefined,
    query: (method, path) =>
      new Set((op(method, path)?.parameters ?? []).filter((p) => p.in === 'query' && typeof p.name === 'string').map((p) => p.name as string)),
  };
}
