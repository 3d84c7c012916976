/**
 * What one tenant may hold of a bound all tenants share: as configured (never more than the whole), else three
 * quarters of it, rounded up so that a bound of one or two is not split. Callers without a tenant count as one tenant.
 * Used by the model gates (`modelRequests.*.maxConcurrentPerTenant`) and `/mcp` (`mcp.endpoint.maxSessionsPerTenant`).
 */
export function tenantShare(total: number, configured: number | undefined): number {
  return Math.min(total, configured ?? Math.ceil((total * 3) / 4));
}
