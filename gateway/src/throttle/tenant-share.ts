/**
 * What one tenant may hold of a bound all tenants share: as configured (never more than the whole), else three
 * quarters of it, rounded up so that a bound of one or two is not split. Callers without a tenant count as one tenant.
 * Used by the model gates (`modelRequests.*.maxConcurrentPerTenant`) and `/mcp` (`mcp.endpoint.maxSessionsPerTenant`).
 */
export function tenantShare(total: number, configured: number | undefined): number {
  return Math.min(total, configured ?? Math.ceil((total * 3) / 4));
}

/** The tenants of one key list, kept per list (the gateway's list is one array until a reload replaces it). */
const tenantsOfList = new WeakMap<readonly string[], number>();

/**
 * How many tenants the API keys belong to, the keys without a tenant counting as one, and never counted past two (a
 * share matters once there is another tenant to keep room for).
 */
export function tenantsAmong(keys: readonly string[], tenantOf: (key: string) => string | undefined): number {
  let n = tenantsOfList.get(keys);
  if (n !== undefined) return n;
  const seen = new Set<string | undefined>();
  for (const k of keys) if (seen.add(tenantOf(k)).size > 1) break;
  tenantsOfList.set(keys, (n = seen.size));
  return n;
}
