/** Who a caller is, as far as owning things goes: its tenant and its principal (an API key, see api/auth.ts). */
export interface Principal {
  tenant?: string | undefined;
  principal?: string | undefined;
}

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
