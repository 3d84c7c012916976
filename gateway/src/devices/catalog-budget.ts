import type { Metrics } from '../metrics.js';
import { REFUSAL_LINES, ThrottledLog, type LevelLog } from '../throttle/throttled-log.js';
import type { ToolCatalog } from './catalog.js';

/** Why a device's catalog was cut or refused: its own bounds (bytes, tools, pages), or the gateway's budget. */
export type CatalogLimit = 'device_bytes' | 'device_tools' | 'device_pages' | 'gateway_budget';

/**
 * What holds a catalog against the budget (a device's session): the catalog it holds is kept on it, so a ready device
 * costs the budget no entry of its own (a Map entry per session cost ~120–200 B of heap per device, docs/performance.md
 * "redteam"). Only the budget writes it.
 */
export interface CatalogHolder {
  heldCatalog?: ToolCatalog | undefined;
}

/**
 * The bytes of every device catalog the gateway holds at once, against one budget (`devices.catalogBudgetBytes`):
 * without it, each device's catalog was bounded but their sum was not, so enough devices with made-up catalogs could
 * fill the heap.
 *
 * A catalog is counted once however many devices hold it: identical catalogs are one interned object (catalog.ts),
 * so a fleet of one firmware costs one catalog, as it does in memory. Each holder (a device's session) holds at most
 * one catalog: taking another releases the first, and closing releases it, so the count is always the sum of what
 * is held and cannot drift. A catalog that does not fit is refused and nothing held changes: whoever holds a catalog
 * keeps it, and a newcomer cannot push it out.
 */
export class CatalogBudget {
  /** Each catalog held, and by how many holders. */
  private readonly refs = new Map<ToolCatalog, number>();
  private held = 0;
  private readonly lines: ThrottledLog | undefined;

  constructor(
    readonly limit: number,
    private readonly report?: { log: LevelLog; metrics: Metrics },
  ) {
    // One line per reason at most 10 times per 10 s: a flood of devices over a bound is counted, not logged each time.
    this.lines = report && new ThrottledLog(report.log, 'warn', REFUSAL_LINES);
  }

  /** Bytes held now. */
  get bytes(): number {
    return this.held;
  }

  /**
   * Hold `catalog` for `holder` in place of what it held, when it fits: a catalog already held by another costs
   * nothing more, and the holder's own catalog, when it is its only holder, frees its bytes for the new one. False
   * when it does not fit: then nothing changed.
   */
  take(holder: CatalogHolder, catalog: ToolCatalog): boolean {
    const prev = holder.heldCatalog;
    if (prev === catalog) return true;
    if (!this.refs.has(catalog)) {
      const freed = prev !== undefined && this.refs.get(prev) === 1 ? prev.bytes : 0;
      if (this.held - freed + catalog.bytes > this.limit) return false;
    }
    this.release(holder);
    holder.heldCatalog = catalog;
    const n = this.refs.get(catalog) ?? 0;
    this.refs.set(catalog, n + 1);
    if (n === 0) this.held += catalog.bytes;
    this.report?.metrics.catalogBytes.set(this.held);
    return true;
  }

  /**
   * The holder's catalog is dropped (its session closed, the device forgotten, a catalog refused): its bytes go back.
   * A second release of one holder finds nothing held and does nothing.
   */
  release(holder: CatalogHolder): void {
    const catalog = holder.heldCatalog;
    if (catalog === undefined) return;
    holder.heldCatalog = undefined;
    const n = this.refs.get(catalog)!;
    if (n > 1) this.refs.set(catalog, n - 1);
    else {
      this.refs.delete(catalog);
      this.held -= catalog.bytes;
    }
    this.report?.metrics.catalogBytes.set(this.held);
  }

  /** A catalog was cut or refused by a bound: counted every time, logged (throttled per reason) with the device's id. */
  refused(reason: CatalogLimit, fields: Record<string, unknown>, msg: string): void {
    this.report?.metrics.catalogsCut.inc({ reason });
    this.lines?.write({ reason, ...fields }, msg, reason);
  }
}
