import {
  ToolsListResultSchema,
  checkJsonBounds,
  describeIssues,
  referenceResultTail,
  referenceResultText,
  safeJsonText,
  tryParseJson,
  type JsonLimits,
  type Tool,
  type ToolsListResult,
} from '@voxgate/protocol';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { BadInputLog } from './bad-input-log.js';
import { guardToolSchemas, type SchemaLimits } from '../schemas/untrusted-schema.js';
import type { RawReplyReader } from './rpc-channel.js';
import { toolBytes, type CachedPage, type ToolsPageCache } from './tools-page-cache.js';

/** What a walk's reader reads: the session's setup context (setup.ts `SetupDeps`) is one; `log` and `badInput` are read only to write. */
export interface PageReaderDeps {
  readonly pages: ToolsPageCache;
  readonly settings: { readonly frameLimits: JsonLimits; readonly schemaLimits: SchemaLimits };
  readonly transport: 'websocket' | 'mqtt';
  readonly metrics: Metrics;
  readonly log: Logger;
  /** The device's bad-input lines (bad-input-log.ts: per session, and within the gateway's budget for all). */
  readonly badInput: Pick<BadInputLog, 'note'>;
}

/**
 * The text that follows the session id in a reference-layout reply to request `id` (`referenceResultTail`), made once
 * per id: setup's requests have small ids, so every device's walk reads the same few strings.
 */
const tails: string[] = [];
const TAILS_KEPT = 256;
export function resultTail(id: number): string {
  if (!(id >= 0 && id < TAILS_KEPT && Number.isInteger(id))) return referenceResultTail(id);
  return (tails[id] ??= referenceResultTail(id));
}

/**
 * The tools/list pages of one walk. A reply in the firmware's exact layout is read from its text (the
 * request's raw reader, before the frame parser runs): from the page cache when another device sent the
 * same text, else validated from that text alone and cached. Anything else (or a page that does not stand
 * alone as a valid page) is not taken, takes the ordinary path, and is validated here once parsed.
 */
export class PageReader implements RawReplyReader {
  /** The page last taken from raw text: a reply that is this object needs no second look. */
  private taken: CachedPage | undefined;

  constructor(private readonly d: PageReaderDeps) {}

  read(text: string, id: number): CachedPage | undefined {
    const pageText = referenceResultText(text, resultTail(id));
    if (pageText === undefined) return undefined;
    let page = this.d.pages.get(pageText);
    if (page) this.d.metrics.hot.toolsPages.cache.inc();
    else {
      if (!checkJsonBounds(text, this.d.settings.frameLimits).ok) return undefined;
      // The entry is the validated parse of its own key text, so it is the same whoever fills it.
      const parsed = tryParseJson(pageText);
      const valid = parsed.ok ? this.validate(parsed.value) : undefined;
      if (!valid?.ok) return undefined;
      page = this.d.pages.store(pageText, valid.page, valid.bytes, valid.listed);
      this.d.metrics.hot.toolsPages.parsed.inc();
    }
    this.d.metrics.hot.framesIn[this.d.transport].mcp.inc();
    this.taken = page;
    return page;
  }

  /** The page a reply stands for: the one read from its text, else the parsed reply, validated. */
  page(reply: unknown, pageNumber: number): CachedPage {
    if (this.taken !== undefined && reply === this.taken) return this.taken;
    const r = this.validate(reply);
    if (!r.ok) {
      throw new GatewayError('DEVICE_ERROR', `malformed tools/list page ${pageNumber}: ${r.detail}`, { method: 'tools/list', malformed: true });
    }
    this.d.metrics.hot.toolsPages.parsed.inc();
    return { serial: 0, result: r.page, bytes: r.bytes, listed: r.listed };
  }

  /**
   * A tools/list result, validated: its tools and cursor (other members are dropped), the size of the tools kept
   * (`toolBytes`, measured once per page text: a cached page carries it) and of all it listed; tools whose schemas are
   * over the bounds are left out (logged, counted).
   */
  private validate(raw: unknown): { ok: true; page: ToolsListResult; bytes: number; listed: number } | { ok: false; detail: string } {
    const r = ToolsListResultSchema.safeParse(raw);
    if (!r.success) return { ok: false, detail: describeIssues(r.error.issues) };
    const tools: Tool[] = [];
    let bytes = 0;
    let leftOut = 0;
    for (const tool of r.data.tools) {
      const schemas = guardToolSchemas(tool.inputSchema, tool.outputSchema, this.d.settings.schemaLimits);
      if (!schemas.ok) {
        this.d.metrics.schemasRefused.inc({ source: 'device', reason: schemas.reason });
        const { reason, detail } = schemas;
        // A line per tool was written without a bound: a page may list a thousand such tools, on every walk (red team 11).
        this.d.badInput.note('warn', { tool: tool.name, reason, detail }, 'tool schema over the bounds; tool left out of the catalog');
        // Left out, but listed: a page of such tools costs its reading as much as a page of kept ones.
        leftOut += toolBytes(tool);
        continue;
      }
      const kept: Tool = { ...tool, inputSchema: schemas.inputSchema };
      if (schemas.outputSchema) kept.outputSchema = schemas.outputSchema;
      tools.push(kept);
      bytes += toolBytes(kept);
    }
    const { tools: _listed, nextCursor, ...other } = r.data;
    // Members a page has beside its tools and cursor are read, counted as listed, and not kept.
    if (Object.keys(other).length > 0) leftOut += Buffer.byteLength(safeJsonText(other, ''));
    const page: ToolsListResult = nextCursor === undefined ? { tools } : { tools, nextCursor };
    return { ok: true, page, bytes, listed: bytes + leftOut };
  }
}
