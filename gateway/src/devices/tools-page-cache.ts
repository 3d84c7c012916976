import type { ToolsListResult } from '@voxgate/protocol';

/** A validated `tools/list` page, shared by every device (of one gateway) that sent exactly the same text. */
export interface CachedPage {
  /** Unique per cached text in this process; 0 for a page that was not cached. */
  readonly serial: number;
  readonly result: ToolsListResult;
}

const DEFAULT_MAX_PAGES = 256;
const HEAD = '{"session_id":"';
/** The envelope's own bound on `session_id` (DeviceFrameSchema): a longer one is not a valid frame. */
const MAX_SESSION_ID = 256;
/** Serials are process-wide: catalogs are interned by the serials of their pages (ToolCatalog.fromPages). */
let serials = 0;

/**
 * Devices of one firmware send byte-identical `tools/list` pages. Keyed by the page's JSON text, this
 * cache lets a session skip JSON.parse, schema validation and catalog hashing for every device after the
 * first. It is only consulted for frames in the exact reference layout
 * `{"session_id":"<sid>","type":"mcp","payload":{"jsonrpc":"2.0","id":<ours>,"result":<page>}}`.
 *
 * Safety rests on one rule, kept by the session: an entry's value is always the validated parse of its
 * own key text (never of another frame, never of a later reply), so whoever fills an entry gets, and
 * gives every other device, exactly what parsing that text would have given.
 */
export class ToolsPageCache {
  private readonly pages = new Map<string, CachedPage>();

  constructor(private readonly maxPages = DEFAULT_MAX_PAGES) {}

  /** What follows the session id in a reference-layout reply to request `id`. */
  static expectAfterSessionId(id: number): string {
    return `","type":"mcp","payload":{"jsonrpc":"2.0","id":${id},"result":`;
  }

  /**
   * The page text inside a reference-layout frame, or undefined when the frame has another shape or an
   * envelope the ordinary parser would refuse. The session id may be any valid string without escapes
   * (MQTT devices send their own, often empty): it does not change what the page parses to.
   */
  static pageText(frame: string, afterSessionId: string): string | undefined {
    if (!frame.startsWith(HEAD)) return undefined;
    const close = frame.indexOf('"', HEAD.length);
    if (close < 0 || close - HEAD.length > MAX_SESSION_ID) return undefined;
    for (let i = HEAD.length; i < close; i++) {
      const c = frame.charCodeAt(i);
      if (c < 0x20 || c === 0x5c /* \ */) return undefined;
    }
    if (!frame.startsWith(afterSessionId, close)) return undefined;
    const start = close + afterSessionId.length;
    if (frame.length <= start + 2 || !frame.endsWith('}}')) return undefined;
    return frame.slice(start, -2);
  }

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
