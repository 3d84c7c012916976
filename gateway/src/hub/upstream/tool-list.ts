import type { Client, Tool } from '@modelcontextprotocol/client';
import { guardToolSchemas } from '../../schemas/untrusted-schema.js';
import type { HubSettings, UpstreamDeps } from './base.js';

/** Pages of one tools/list walk, at most (the SDK's own default bound on its aggregate walk). */
export const MAX_TOOL_PAGES = 64;

/** Why a walk stopped with pages left unasked (voxgate_mcp_server_tool_lists_cut_total). */
export type ToolListCut = 'tools' | 'bytes' | 'pages';

export interface ToolListBounds {
  maxTools: number;
  maxBytes: number;
  /** The server's `allowed_tools`: the others are never kept. */
  allowed?: readonly string[] | undefined;
  /** Each page's own deadline. */
  timeoutMs: number;
}

/**
 * A server's tools, walked page by page and kept within bounds as they come: `maxTools` names (allowed ones, each
 * name once), `maxBytes` of their JSON, MAX_TOOL_PAGES pages. The SDK's aggregate walk (`client.listTools()`) kept
 * every tool of 64 pages (each up to the message bound, ~1 MiB) and wrote them all into its response cache: a tool
 * process dialed in with an endpoint token made the gateway hold ~64 MiB per endpoint, and one that never stopped
 * paginating failed its connect after 64 round trips.
 */
export async function walkTools(
  client: Pick<Client, 'request'>,
  b: ToolListBounds,
  keep: (tools: Tool[]) => Tool[],
): Promise<{ tools: Tool[]; bytes: number; cut?: ToolListCut }> {
  const tools: Tool[] = [];
  const names = new Set<string>();
  let bytes = 0;
  let cursor: string | undefined;
  for (let pages = 0; ; pages++) {
    if (pages >= MAX_TOOL_PAGES) return { tools, bytes, cut: 'pages' };
    const page = await client.request({ method: 'tools/list', params: cursor === undefined ? {} : { cursor } }, { timeout: b.timeoutMs });
    for (const t of keep(page.tools)) {
      if (b.allowed && !b.allowed.includes(t.name)) continue;
      // A repeated name is kept (base.ts `known` keeps its first definition and says so) but counts once.
      if (!names.has(t.name) && names.size >= b.maxTools) return { tools, bytes, cut: 'tools' };
      const size = Buffer.byteLength(JSON.stringify(t));
      if (bytes + size > b.maxBytes) return { tools, bytes, cut: 'bytes' };
      bytes += size;
      names.add(t.name);
      tools.push(t);
    }
    const next = page.nextCursor;
    if (next === undefined || next === cursor) return { tools, bytes };
    cursor = next;
  }
}

/** Lines about refused schemas one listing writes; the rest are counted in one line (`heldLines`). */
export const REFUSED_LINES = 5;

/**
 * Tools whose schemas are over the bounds are left out (counted; the first REFUSED_LINES of a listing logged, each
 * name cut to 64 characters: a page of 1 MiB held tens of thousands of refused tools, or one name of 1 MiB, and a
 * line each was the server's to write into our log); the rest keep sanitized schemas.
 */
export function boundedTools(
  tools: Tool[],
  d: Pick<UpstreamDeps, 'log' | 'onSchemaRefused'> & { settings: Pick<HubSettings, 'schemaLimits'> },
  lines: { written: number; held: number },
): Tool[] {
  const kept: Tool[] = [];
  for (const t of tools) {
    const schemas = guardToolSchemas(t.inputSchema, t.outputSchema, d.settings.schemaLimits);
    if (!schemas.ok) {
      d.onSchemaRefused?.(schemas.reason);
      if (lines.written++ < REFUSED_LINES)
        d.log.warn({ tool: t.name.slice(0, 64), reason: schemas.reason, detail: schemas.detail }, 'upstream tool schema over the bounds; tool left out');
      else lines.held++;
      continue;
    }
    const tool: Tool = { ...t, inputSchema: schemas.inputSchema as Tool['inputSchema'] };
    if (schemas.outputSchema) tool.outputSchema = schemas.outputSchema as NonNullable<Tool['outputSchema']>;
    kept.push(tool);
  }
  return kept;
}

/**
 * `run`, one at a time: called while it runs, it runs once more after (however many calls came meanwhile). A
 * server's list_changed flood is debounced by the SDK (300 ms), but a walk can take longer than that.
 */
export function oneAtATime(run: () => Promise<void>): () => void {
  let running = false;
  let again = false;
  const go = (): void => {
    if (running) return void (again = true);
    running = true;
    void run().finally(() => {
      running = false;
      if (again) {
        again = false;
        go();
      }
    });
  };
  return go;
}
