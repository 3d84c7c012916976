import type { Tool } from '@voxgate/protocol';
import type { Logger } from 'pino';
import { PageReader, type PageReaderDeps } from './page-reader.js';
import type { SessionSettings } from './settings.js';
import type { CachedPage } from './tools-page-cache.js';

/** What ends a walk early (the caps), and where it says so. */
export interface WalkLimits {
  readonly settings: Pick<SessionSettings, 'maxToolPages' | 'maxTools' | 'maxCatalogBytes'>;
  readonly log: Logger;
}

/**
 * One tools/list walk: its page reader, the pages so far and their tool count, the page asked next and its cursor.
 * The walk keeps its pages, not a copy of their tools: identical devices' walks end on the pages' catalog
 * (ToolCatalog.fromPages), and the tools are gathered only for a catalog not seen yet (or one over the cap).
 */
export class ToolsWalk {
  /** The session is the reader's context (its page cache, limits, metrics; its logger read only to write): no deps object per walk. */
  readonly reader: PageReader;
  readonly pages: CachedPage[] = [];
  count = 0;
  /** The pages' size (CachedPage.bytes summed): the catalog is cut at `maxCatalogBytes` of it. */
  bytes = 0;
  /** What the pages listed (CachedPage.listed summed, at least `bytes`): the walk stops asking at `maxCatalogBytes` of it. */
  listed = 0;
  /** The walk stopped at `maxCatalogBytes` with pages left unasked: the catalog is cut (setup.ts). */
  overBytes = false;
  /** The walk stopped at `maxToolPages` or `maxTools` with pages left unasked: the catalog is cut (catalog-bounds.ts). */
  capped: 'pages' | 'tools' | undefined = undefined;
  /** The page asked next (1-based). */
  page = 1;
  private cursor: string | undefined;
  /** Cursors followed so far: the first in a field, a Set only from the second (most catalogs have one or two). */
  private firstCursor: string | undefined;
  private seen: Set<string> | undefined;

  constructor(deps: PageReaderDeps) {
    this.reader = new PageReader(deps);
  }

  /** The request's params for the page asked next. */
  params(): Record<string, unknown> {
    const params: Record<string, unknown> = { withUserTools: true };
    if (this.cursor !== undefined) params['cursor'] = this.cursor;
    return params;
  }

  /**
   * Page `p` answered: true when the walk ends with it (no next cursor, a repeated one, a cap), else on to the next page.
   * `d.log` is read only to write a line: the session makes its logger on first use (a child logger per device else).
   */
  take(p: CachedPage, d: WalkLimits): boolean {
    const { settings } = d;
    const page = this.page;
    this.pages.push(p);
    this.count += p.result.tools.length;
    this.bytes += p.bytes;
    this.listed += p.listed;
    const next = p.result.nextCursor;
    if (next === undefined || next === '') return true;
    if (next === this.firstCursor || this.seen?.has(next)) {
      d.log.warn({ cursor: next, page }, 'device repeated a tools/list cursor; stopping the walk');
      return true;
    }
    if (page >= settings.maxToolPages) {
      this.capped = 'pages';
      return true;
    }
    if (this.count >= settings.maxTools) {
      this.capped = 'tools';
      return true;
    }
    // Pages past the byte bound would only be cut: not asked, so a walk holds at most the bound and one page. What was
    // listed counts, kept or not: pages of tools left out, or of other members, cost their reading as much (red team 11).
    if (this.listed >= settings.maxCatalogBytes) return (this.overBytes = true);
    if (this.firstCursor === undefined) this.firstCursor = next;
    else (this.seen ??= new Set([this.firstCursor])).add(next);
    this.cursor = next;
    this.page = page + 1;
    return false;
  }
}

/** Every tool of the walk's pages, in order. */
export function toolsOf(pages: readonly CachedPage[]): Tool[] {
  const tools: Tool[] = [];
  for (const p of pages) for (const t of p.result.tools) tools.push(t);
  return tools;
}

/** The last tool listed on the walk's pages, if any. */
export function lastToolName(pages: readonly CachedPage[]): string | undefined {
  for (let i = pages.length - 1; i >= 0; i--) {
    const tools = pages[i]!.result.tools;
    if (tools.length > 0) return tools[tools.length - 1]!.name;
  }
  return undefined;
}
