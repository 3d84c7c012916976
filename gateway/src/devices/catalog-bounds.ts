import type { Tool } from '@voxgate/protocol';
import type { CatalogBudget, CatalogHolder } from './catalog-budget.js';
import { ToolCatalog } from './catalog.js';
import type { SessionSettings } from './settings.js';
import type { CatalogGap, ListedTools } from './setup.js';
import { toolBytes } from './tools-page-cache.js';
import { lastToolName, type ToolsWalk } from './tools-walk.js';

/**
 * The walk's tools up to `maxCatalogBytes` (then `maxTools`), with the gap that says where they stop: a byte cut
 * comes before a page the device refused, which is past it. Each wholly kept page counts by its size; only the page
 * the bound falls in is measured tool by tool.
 */
export function cutToBytes(walk: ToolsWalk, settings: Pick<SessionSettings, 'maxCatalogBytes' | 'maxTools' | 'catalogs'>, deviceId: string): ListedTools {
  const max = settings.maxCatalogBytes;
  const tools: Tool[] = [];
  let used = 0;
  let page = 0;
  let cut = false;
  for (const p of walk.pages) {
    page++;
    if (used + p.bytes <= max) {
      used += p.bytes;
      for (const t of p.result.tools) tools.push(t);
      continue;
    }
    for (const t of p.result.tools) {
      const bytes = toolBytes(t);
      if (used + bytes > max) break;
      used += bytes;
      tools.push(t);
    }
    cut = true;
    break;
  }
  // Every page asked for fitted: the cut is at the page the walk did not ask for.
  if (!cut) page++;
  const after = tools.length > 0 ? tools[tools.length - 1]!.name : undefined;
  settings.catalogs.refused(
    'device_bytes',
    { deviceId, page, after, listedBytes: walk.listed, keptBytes: used, cap: max },
    'device catalog over session.maxCatalogBytes; catalog cut',
  );
  if (tools.length > settings.maxTools) tools.length = settings.maxTools;
  const gap: CatalogGap = {
    page,
    after,
    error: `the device's tools are over session.maxCatalogBytes (${max} bytes)`,
    warning: `catalog cut: over ${max} bytes (session.maxCatalogBytes) ${after === undefined ? 'at the first tool' : `after ${after}`}`,
  };
  return { catalog: ToolCatalog.from(tools), gap };
}

/**
 * Where `maxTools` or `maxToolPages` cut the walk's catalog, counted and logged like the byte bounds; undefined when
 * neither did. The catalog itself is cut by the walk (it stops asking) and by `maxTools` (setup.ts keeps that many).
 */
export function capGap(walk: ToolsWalk, settings: Pick<SessionSettings, 'maxTools' | 'maxToolPages' | 'catalogs'>, deviceId: string): CatalogGap | undefined {
  const { maxTools, maxToolPages } = settings;
  let page: number;
  let after: string | undefined;
  let reason: 'device_tools' | 'device_pages';
  if (walk.count > maxTools) {
    // The cut falls inside a page: the page holding tool number maxTools + 1.
    reason = 'device_tools';
    let before = 0;
    page = 0;
    for (const p of walk.pages) {
      page++;
      const n = p.result.tools.length;
      if (before + n > maxTools) {
        after = maxTools > before ? p.result.tools[maxTools - before - 1]!.name : lastToolName(walk.pages.slice(0, page - 1));
        break;
      }
      before += n;
    }
  } else if (walk.capped !== undefined) {
    reason = walk.capped === 'tools' ? 'device_tools' : 'device_pages';
    page = walk.pages.length + 1;
    after = lastToolName(walk.pages);
  } else return undefined;
  const kept = Math.min(walk.count, maxTools);
  const fields = { deviceId, page, after, listedTools: walk.count, keptTools: kept, pages: walk.pages.length };
  const bound = reason === 'device_tools' ? `${maxTools} tools (session.maxTools)` : `${maxToolPages} pages (session.maxToolPages)`;
  settings.catalogs.refused(reason, fields, `device catalog over ${bound}; catalog cut`);
  const where = after === undefined ? 'at the first tool' : `after ${after}`;
  return {
    page,
    after,
    error: `the device's tools are over session.${reason === 'device_tools' ? `maxTools (${maxTools})` : `maxToolPages (${maxToolPages})`}`,
    warning: `catalog cut: over ${bound} ${where}`,
  };
}

/**
 * The listed catalog, held against the gateway's budget for `holder` (a live session; replacing what it held). A
 * catalog that does not fit is refused whole (a partial catalog would depend on who came first by a few bytes): the
 * device is ready with no tools and says why, and what others hold is untouched.
 */
export function holdOrRefuse(listed: ListedTools, budget: CatalogBudget, holder: CatalogHolder, deviceId: string): ListedTools {
  if (budget.take(holder, listed.catalog)) return listed;
  budget.release(holder);
  const fields = { deviceId, bytes: listed.catalog.bytes, held: budget.bytes, budget: budget.limit };
  budget.refused('gateway_budget', fields, 'device catalog refused: devices.catalogBudgetBytes is full');
  const gap: CatalogGap = {
    page: 1,
    after: undefined,
    error: `the gateway holds device catalogs up to devices.catalogBudgetBytes (${budget.limit} bytes), and this one (${listed.catalog.bytes} bytes) does not fit`,
    warning:
      'catalog refused: the gateway is at its device catalog budget (devices.catalogBudgetBytes); it is listed again when the device reconnects or its tools change',
  };
  return { catalog: ToolCatalog.from([]), gap };
}
