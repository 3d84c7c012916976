import type { Tool, ToolsListResult } from '@voxgate/protocol';

/** A validated `tools/list` page, shared by every device (of one gateway) that sent exactly the same text. */
export interface CachedPage {
  /** Unique per cached text in this process; 0 for a page that was not cached. */
  readonly serial: number;
  readonly result: ToolsListResult;
  /** Its tools' size (`toolBytes` summed): what the catalog keeps of it, cut at `session.maxCatalogBytes`. */
  readonly bytes: number;
  /**
   * What the device listed on it: `bytes`, and the tools left out (schemas over the bounds) and any other member, each
   * by its JSON in UTF-8. A walk stops asking once its pages listed `session.maxCatalogBytes` (tools-walk.ts).
   */
  readonly listed: number;
}

/**
 * One tool's size as a device listed it (its validated JSON, in UTF-8), and one for its comma in a list: a walk's
 * pages sum to the size of the tools' JSON, cut anywhere at a tool with the same measure (setup.ts).
 */
export function toolBytes(tool: Tool): number {
  return Buffer.byteLength(JSON.stringify(tool)) + 1;
}

/** The size of a page's tools (`toolBytes` summed). */
export function pageBytes(tools: readonly Tool[]): number {
  let bytes = 0;
  for (const t of tools) bytes += toolBytes(t);
  return bytes;
}

/** An entry and its own key text (the text it is the validated parse of). */
interface Entry {
  readonly text: string;
  readonly page: CachedPage;
}

const DEFAULT_MAX_PAGES = 256;
/**
 * Characters of page text the cache holds in all (each entry holds its text and its parse). A firmware's pages are at
 * most 8000 bytes, so 256 of them are 2 MB; the count alone let pages as large as a frame (256 KiB over MQTT) be kept,
 * 256 of them, ~128 MB with their parse, which any device could fill by listing new pages (red team 11).
 */
const DEFAULT_MAX_CHARS = 4 * 1024 * 1024;
/** Entries found last, compared before the Map is asked: a firmware's few pages, and a few firmwares at once. */
const RECENT = 8;
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
 *
 * A lookup compares the text with the entries found last before it asks the Map: a Map lookup hashes the
 * whole text (a page is up to 8 KB: ~16 µs), a comparison with an equal text is a memory compare (a tenth of
 * that), and one with another text of the same length stops at the first difference. A page found either
 * way is the entry whose key equals the text: the same answer.
 */
export class ToolsPageCache {
  private readonly pages = new Map<string, Entry>();
  private readonly recent: Entry[] = [];
  private next = 0;
  /** The entries' texts' length summed, against `maxChars`. */
  private chars = 0;

  constructor(
    private readonly maxPages = DEFAULT_MAX_PAGES,
    private readonly maxChars = DEFAULT_MAX_CHARS,
  ) {}

  get(pageText: string): CachedPage | undefined {
    for (const e of this.recent) if (e.text.length === pageText.length && e.text === pageText) return e.page;
    const e = this.pages.get(pageText);
    if (e === undefined) return undefined;
    this.remember(e);
    return e.page;
  }

  /** Store the validated parse of `pageText` itself (see the class comment); `bytes` is its tools' size when known, `listed` what it listed. */
  store(pageText: string, result: ToolsListResult, bytes = pageBytes(result.tools), listed = bytes): CachedPage {
    const existing = this.pages.get(pageText);
    if (existing) return existing.page;
    // A page larger than the whole bound is not kept (serial 0: its catalog is built from its tools).
    if (pageText.length > this.maxChars) return { serial: 0, result, bytes, listed };
    while (this.pages.size > 0 && (this.pages.size >= this.maxPages || this.chars + pageText.length > this.maxChars))
      this.evict(this.pages.keys().next().value!);
    const e: Entry = { text: pageText, page: { serial: ++serials, result, bytes, listed } };
    this.pages.set(pageText, e);
    this.chars += pageText.length;
    this.remember(e);
    return e.page;
  }

  private remember(e: Entry): void {
    if (this.recent.length < RECENT) this.recent.push(e);
    else this.recent[this.next] = e;
    this.next = (this.next + 1) % RECENT;
  }

  private evict(text: string): void {
    const e = this.pages.get(text);
    this.pages.delete(text);
    if (e !== undefined) this.chars -= e.text.length;
    const at = e === undefined ? -1 : this.recent.indexOf(e);
    if (at < 0) return;
    // An evicted entry must not be found by comparison either; which slot is replaced next is only a heuristic.
    this.recent.splice(at, 1);
    this.next = this.recent.length;
  }
}
