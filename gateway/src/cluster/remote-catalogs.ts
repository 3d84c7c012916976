import type { KV } from '@nats-io/kv';
import type { Logger } from 'pino';
import { ToolCatalog } from '../devices/catalog.js';
import { REFUSAL_LINES, ThrottledLog } from '../throttle/throttled-log.js';
import { catalogKey, StoredCatalog } from './wire.js';

export interface RemoteCatalogsDeps {
  kv: KV;
  log: Logger;
  /** Bytes of the catalogs kept at once (`devices.catalogBudgetBytes`, counted apart from the local sessions' budget). */
  limit: number;
  /** A catalog was loaded: the devices that name it can be listed now. */
  onLoaded(): void;
}

const decoder = new TextDecoder();

/**
 * The catalogs the cluster's presence entries name, by hash: loaded from the KV bucket when an entry first names one,
 * kept while any entry names it, dropped when the last one moves to another catalog or goes. Before, every catalog the
 * cluster ever announced stayed for the process's life (a fleet whose firmware changes grew it at each release).
 *
 * Their bytes are bounded by `limit`: a catalog that would pass it is not loaded (its devices are left out of the
 * remote listing, as a catalog not loaded yet is), logged at most 10 times per 10 s; it is tried again when another
 * entry names it. Peers are the deployment's own instances, but a peer's bug or a full KV bucket must not fill this
 * process's heap.
 */
export class RemoteCatalogs {
  /** How many presence entries name each catalog. */
  private readonly users = new Map<string, number>();
  private readonly loaded = new Map<string, ToolCatalog>();
  private readonly loading = new Set<string>();
  /** This instance's own catalogs already written to the bucket (written once per hash while named). */
  private readonly stored = new Set<string>();
  private held = 0;
  private readonly lines: ThrottledLog;

  constructor(private readonly d: RemoteCatalogsDeps) {
    this.lines = new ThrottledLog(d.log, 'warn', REFUSAL_LINES);
  }

  /** Bytes of the catalogs kept now. */
  get bytes(): number {
    return this.held;
  }

  /** How many catalogs are kept now. */
  get size(): number {
    return this.loaded.size;
  }

  get(hash: string | undefined): ToolCatalog | undefined {
    return hash === undefined ? undefined : this.loaded.get(hash);
  }

  /** A presence entry named `prev` and now names `next` (undefined: none, or the entry is gone). */
  retarget(prev: string | undefined, next: string | undefined): void {
    if (prev === next) return;
    if (next !== undefined) {
      this.users.set(next, (this.users.get(next) ?? 0) + 1);
      if (!this.loaded.has(next)) void this.load(next);
    }
    if (prev !== undefined) {
      const n = this.users.get(prev) ?? 0;
      if (n > 1) this.users.set(prev, n - 1);
      else {
        this.users.delete(prev);
        this.drop(prev);
      }
    }
  }

  /**
   * This instance's catalog, written to the bucket once (the entry that names it is written after it, so a peer that
   * reads the entry finds the catalog) and kept: this instance's echo of its own entry names it.
   */
  async store(catalog: ToolCatalog): Promise<void> {
    const { hash } = catalog;
    if (this.stored.has(hash)) return;
    await this.d.kv.create(catalogKey(hash), JSON.stringify({ tools: catalog.tools })).catch(() => undefined); // exists: same content
    this.stored.add(hash);
    this.keep(hash, catalog);
  }

  private async load(hash: string): Promise<void> {
    if (this.loading.has(hash)) return;
    this.loading.add(hash);
    try {
      const e = await this.d.kv.get(catalogKey(hash)).catch(() => null);
      // Named no more (or loaded meanwhile): nothing to keep.
      if (!e || e.operation !== 'PUT' || !this.users.has(hash) || this.loaded.has(hash)) return;
      const stored = StoredCatalog.parse(JSON.parse(decoder.decode(e.value)));
      const catalog = ToolCatalog.from(
        stored.tools.map((t) => ({
          name: t.name,
          description: t.description,
          inputSchema: t.inputSchema as never,
          ...(t.annotations ? { annotations: t.annotations } : {}),
        })),
      );
      // The hash is the content's: a catalog whose tools do not hash to its key is refused.
      if (catalog.hash !== hash) throw new Error('catalog content does not match its hash');
      if (this.held + catalog.bytes > this.d.limit) {
        const fields = { hash, bytes: catalog.bytes, held: this.held, budget: this.d.limit };
        this.lines.write(fields, 'cluster catalog not loaded: devices.catalogBudgetBytes is full', 'remote_budget');
        return;
      }
      this.keep(hash, catalog);
      this.d.onLoaded();
    } catch (err) {
      this.d.log.warn({ err, hash }, 'cluster catalog refused');
    } finally {
      this.loading.delete(hash);
    }
  }

  private keep(hash: string, catalog: ToolCatalog): void {
    if (this.loaded.has(hash)) return;
    this.loaded.set(hash, catalog);
    this.held += catalog.bytes;
  }

  private drop(hash: string): void {
    const catalog = this.loaded.get(hash);
    this.stored.delete(hash);
    if (catalog === undefined) return;
    this.loaded.delete(hash);
    this.held -= catalog.bytes;
  }
}
