import type { ToolsListResult } from '@voxgate/protocol';

/** A validated `tools/list` page, shared by every device that sent exactly the same text. */
export interface CachedPage {
  /** Unique per cached text; 0 for a page that was not cached. */
  readonly serial: number;
  readonly result: ToolsListResult;
}

const MAX_PAGES = 256;
const HEAD = '{"session_id":"';

/**
 * Devices of one firmware send byte-identical `tools/list` pages. Keyed by the page's JSON text, this
 * cache lets a session skip JSON.parse, schema validation and catalog hashing for every device after the
 * first. It is only consulted for frames in the exact reference layout
 * `{"session_id":"<sid>","type":"mcp","payload":{"jsonrpc":"2.0","id":<ours>,"result":<page>}}`, so the frame
 * is fully determined by the key (the session id does not change the result); anything else takes the
 * ordinary path.
 */
export class ToolsPageCache {
  private readonly pages = new Map<string, CachedPage>();
  private serials = 0;

  /** What follows the session id in a reference-layout reply to request `id`. */
  static expectAfterSessionId(id: number): string {
    return `","type":"mcp","payload":{"jsonrpc":"2.0","id":${id},"result":`;
  }

  /**
   * The page text inside a reference-layout frame, or undefined when the frame has another shape. The
   * session id may be any string without escapes (MQTT devices send their own, often empty): it does not
   * change what the page parses to.
   */
  static pageText(frame: string, afterSessionId: string): string | undefined {
    if (!frame.startsWith(HEAD)) return undefined;
    const close = frame.indexOf('"', HEAD.length);
    if (close < 0 || frame.lastIndexOf('\\', close) >= HEAD.length) return undefined;
    if (!frame.startsWith(afterSessionId, close)) return undefined;
    const start = close + afterSessionId.length;
    if (frame.length <= start + 2 || !frame.endsWith('}}')) return undefined;
    return frame.slice(start, -2);
  }

  get(pageText: string): CachedPage | undefined {
    return this.pages.get(pageText);
  }

  store(pageText: string, result: ToolsListResult): CachedPage {
    const existing = this.pages.get(pageText);
    if (existing) return existing;
    if (this.pages.size >= MAX_PAGES) this.pages.delete(this.pages.keys().next().value!);
    const page: CachedPage = { serial: ++this.serials, result };
    this.pages.set(pageText, page);
    return page;
  }
}

export const TOOLS_PAGES = new ToolsPageCache();
