import { createHash } from 'node:crypto';
import { isUserOnlyTool, type Tool } from '@voxgate/protocol';

export interface CatalogTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  annotations?: Record<string, unknown>;
  userOnly: boolean;
}

/**
 * A device's tool list, immutable, with a content hash. Identical catalogs (a fleet of one firmware)
 * are interned: every device holds a reference to one shared object, not its own copy.
 */
export class ToolCatalog {
  readonly tools: readonly CatalogTool[];
  private readonly byName: ReadonlyMap<string, CatalogTool>;

  private constructor(
    readonly hash: string,
    tools: CatalogTool[],
    /** UTF-8 bytes of the tools' JSON as kept here: what the gateway-wide catalog budget counts (catalog-budget.ts). */
    readonly bytes: number,
  ) {
    this.tools = tools;
    this.byName = new Map(tools.map((t) => [t.name, t]));
  }

  get(name: string): CatalogTool | undefined {
    return this.byName.get(name);
  }

  get size(): number {
    return this.tools.length;
  }

  private static readonly interned = new Map<string, WeakRef<ToolCatalog>>();
  private static readonly finalizer = new FinalizationRegistry<string>((hash) => {
    const ref = ToolCatalog.interned.get(hash);
    if (ref && !ref.deref()) ToolCatalog.interned.delete(hash);
  });

  private static readonly byPages = new Map<string, WeakRef<ToolCatalog>>();

  /**
   * The catalog for a walk of cached pages: the same pages give the same catalog, found without hashing
   * the tools again. Pages that were not cached (serial 0) fall back to `from`. `tools` may be a function: then the
   * tools are gathered only when the pages' catalog is not known yet.
   */
  static fromPages(pages: ReadonlyArray<{ serial: number }>, tools: readonly Tool[] | (() => readonly Tool[])): ToolCatalog {
    // The key in one loop, with no callback, closure or array of its own: this runs once per ready device, and the
    // `map(…).join(',')` it replaced was re-optimized in every fresh gateway's first seconds (docs/performance.md, "fleetjit").
    let key = '';
    for (let i = 0; i < pages.length; i++) {
      const serial = pages[i]!.serial;
      if (serial === 0) return ToolCatalog.from(typeof tools === 'function' ? tools() : tools);
      key = i === 0 ? String(serial) : `${key},${serial}`;
    }
    const known = ToolCatalog.byPages.get(key)?.deref();
    if (known) return known;
    const catalog = ToolCatalog.from(typeof tools === 'function' ? tools() : tools);
    if (ToolCatalog.byPages.size >= 1024) ToolCatalog.byPages.delete(ToolCatalog.byPages.keys().next().value!);
    ToolCatalog.byPages.set(key, new WeakRef(catalog));
    return catalog;
  }

  /** Build (or reuse) the catalog for these tools; a repeated name keeps its first definition. */
  static from(tools: readonly Tool[]): ToolCatalog {
    const seen = new Set<string>();
    const list: CatalogTool[] = [];
    for (const t of tools) {
      if (seen.has(t.name)) continue;
      seen.add(t.name);
      const entry: CatalogTool = {
        name: t.name,
        description: t.description ?? '',
        inputSchema: t.inputSchema,
        userOnly: isUserOnlyTool(t),
      };
      if (t.annotations) entry.annotations = t.annotations;
      list.push(entry);
    }
    // One serialisation gives the hash and the size.
    const json = JSON.stringify(list);
    const hash = createHash('sha256').update(json).digest('base64url').slice(0, 22);
    const existing = ToolCatalog.interned.get(hash)?.deref();
    if (existing) return existing;
    const catalog = new ToolCatalog(hash, list, Buffer.byteLength(json));
    ToolCatalog.interned.set(hash, new WeakRef(catalog));
    ToolCatalog.finalizer.register(catalog, hash);
    return catalog;
  }
}
