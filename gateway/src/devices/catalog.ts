import { createHash } from 'node:crypto';
import { isUserOnlyTool, type Tool } from '@voxgate/protocol';
import { checkArguments, type ArgumentProblem } from './arguments.js';

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

  checkArguments(tool: CatalogTool, args: Record<string, unknown>): ArgumentProblem[] | undefined {
    return checkArguments(`${this.hash}:${tool.name}`, tool.inputSchema, args);
  }

  private static readonly interned = new Map<string, WeakRef<ToolCatalog>>();
  private static readonly finalizer = new FinalizationRegistry<string>((hash) => {
    const ref = ToolCatalog.interned.get(hash);
    if (ref && !ref.deref()) ToolCatalog.interned.delete(hash);
  });

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
    const hash = createHash('sha256').update(JSON.stringify(list)).digest('base64url').slice(0, 22);
    const existing = ToolCatalog.interned.get(hash)?.deref();
    if (existing) return existing;
    const catalog = new ToolCatalog(hash, list);
    ToolCatalog.interned.set(hash, new WeakRef(catalog));
    ToolCatalog.finalizer.register(catalog, hash);
    return catalog;
  }
}
