import type { ToolsListResult } from '@voxgate/protocol';

/** A validated `tools/list` page, shared by every device (of one gateway) that sent exactly the same text. */
export interface CachedPage {
  /** Unique per cached text in this process; 0 for a page that was not cached. */
  readonly serial: number;
  readonly result: ToolsListResult;
}

const DEFAULT_MAX_PAGES = 256;
/** Serials are process-wide: catalogs are interned by the serials of their pages (ToolCatalog.fromPages). */
let serials = 0;

/**
 * Devices of one firmware send byte-identical `tools/list` pages. Keyed by the page's JSON text, this
 * cache lets a session skip JSON.parse, schema validation and catalog hashing for every device after the
 * first. It is only consulted for frames in the firmware's exact layout (protocol's `referenceResultText`).
 *
 * Safety rests on one rule, kept by the page reader (devices/page-reader.ts): an entry's value is always
 * the validated parse of its own key text (never of another frame, never of a later reply), so whoever
 * fills an entry gets, and gives every other device, exactly what parsing that text would have given.
 */
export class ToolsPageCache {
  private readonly pages = new Map<string, CachedPage>();

  constructor(private readonly maxPages = DEFAULT_MAX_PAGES) {}

  get(pageText: string): CachedPage | undefined {
    return this.pages.get(pageText);
  }

  /** Store the validated parse of `pageText` itself (see the class comment). */
  store(pageText: string, result: ToolsListResult): CachedPage {
    const existing = this.pages.get(pageText);
    if (existing) return existing;
    if (this.pages.size >= this.maxPages) this.pages.delete(this.pages.keys().next().value!);
    const page: CachedPage = { serial: ++serials, result };
    this.pages.set(pageText, page);
    return page;
  }
}
