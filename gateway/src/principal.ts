/** Who a caller is, as far as owning things goes: its tenant and its principal (an API key, see api/auth.ts). */
export interface Principal {
  tenant?: string | undefined;
  principal?: string | undefined;
  /**
   * A caller without a tenant that is not an operator: it sees only what belongs to no tenant. A device's own voice
   * conversation when the device has no tenant (anyone can be such a device where enrollment is open).
   */
  untenantedOnly?: boolean | undefined;
}

/**
 * The principals of API keys begin so (api/auth.ts principalOf: a fingerprint of the key, never the key). Other
 * principals (`device:<id>`, a device's own conversation) stand for no key, so no key's removal revokes them.
 */
export const KEY_PRINCIPAL_PREFIX = 'key:';
export const isKeyPrincipal = (p: string | undefined): p is string => p !== undefined && p.startsWith(KEY_PRINCIPAL_PREFIX);

/**
 * Who owns what a caller starts (an assistant conversation, its turns and their pending confirmations): the
 * key (principal) that started it, within its tenant. Keys of one tenant do not share them, and keys without
 * a tenant are strangers to each other. A caller without a principal owns nothing it can find again.
 */
export function ownerOf(c: Principal): string | undefined {
  return c.principal === undefined ? undefined : `${c.tenant ?? ''}\u0000${c.principal}`;
}

/** Whether `c` may read or act on what `owner` started (see ownerOf). */
export function isOwner(owner: string | undefined, c: Principal): boolean {
  return owner !== undefined && owner === ownerOf(c);
}

/**
 * The tenant rule, in one place. A key without a tenant is an operator: it sees and acts on every device,
 * enrollment, event and MCP endpoint. A key with a tenant sees only what belongs to that tenant (what has
 * no tenant yet belongs to operators only). Everything that scopes a caller to devices asks this.
 */
export function canSee(caller: Pick<Principal, 'tenant' | 'untenantedOnly'>, ownerTenant: string | undefined): boolean {
  if (caller.tenant !== undefined) return caller.tenant === ownerTenant;
  return caller.untenantedOnly !== true || ownerTenant === undefined;
}

/** An operator: no tenant, and not limited to what has none (see Principal.untenantedOnly). */
export function isOperator(caller: Pick<Principal, 'tenant' | 'untenantedOnly'>): boolean {
  return caller.tenant === undefined && caller.untenantedOnly !== true;
}

/**
 * Whose share of a per-tenant bound a caller draws on (the assistant's turns per tenant): its tenant; operators
 * share one; devices without a tenant share another, so that such devices talking at once (anyone can be one where
 * enrollment is open) cannot use up the operators' share. The NUL keeps it apart from any tenant's name.
 */
export function shareOf(caller: Pick<Principal, 'tenant' | 'untenantedOnly'>): string | undefined {
  return caller.tenant ?? (caller.untenantedOnly === true ? '\u0000untenanted devices' : undefined);
}

/**
 * Hosted MCP servers are shared services, not owned things, so their rule differs on purpose: a server
 * without `tenants` serves every caller; a server with `tenants` serves keys of those tenants only (not
 * even operator keys, which have no tenant).
 */
export function mayUseServer(caller: Pick<Principal, 'tenant'>, serverTenants: readonly string[] | undefined): boolean {
  return serverTenants === undefined || (caller.tenant !== undefined && serverTenants.includes(caller.tenant));
}
