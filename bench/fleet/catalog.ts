/**
 * The tool catalog every simulated device serves, built once per fleet process and shared by all its
 * devices: the reference firmware's tools (`test/support/reference-device.ts`, serialized by the same
 * `toolJson` as McpTool::to_json) plus synthetic board tools, split into pages exactly as the firmware's
 * GetToolsList does (8000-byte budget, the cursor is the name of the first tool of the next page).
 * Pages are pre-rendered strings: a device answering tools/list copies nothing.
 */
import { referenceTools, toolJson, type RefTool } from '../../test/support/reference-device.js';

const PAGE_BUDGET = 8000;

/** The simulated board's hello and initialize result, as every bench device sends them. */
export const HELLO = JSON.stringify({
  type: 'hello',
  version: 1,
  features: { mcp: true },
  transport: 'websocket',
  audio_params: { format: 'opus', sample_rate: 16000, channels: 1, frame_duration: 60 },
});
export const INIT_RESULT = '{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"bench-board","version":"1.7.6"}}';

export interface Catalog {
  /** cursor ('' for the first page) -> the `result` JSON text of that page. */
  pages: Map<string, string>;
  toolNames: Set<string>;
  pageCount: number;
}

function syntheticTool(i: number): RefTool {
  return {
    name: `self.bench.tool_${i}`,
    description: `Synthetic board tool ${i} of the benchmark fleet. It takes a level between 0 and 100 and an optional label and echoes them back.`,
    properties: { level: { type: 'integer', minimum: 0, maximum: 100 }, label: { type: 'string', default: 'none' } },
    run: () => true,
  };
}

/** firmware order: common tools, board tools, then user-only tools. */
function toolsFor(extra: number): RefTool[] {
  const ref = referenceTools();
  const board = Array.from({ length: extra }, (_, i) => syntheticTool(i));
  return [...ref.filter((t) => !t.userOnly), ...board, ...ref.filter((t) => t.userOnly)];
}

function paginate(tools: RefTool[]): Map<string, string> {
  const json = tools.map((t) => toolJson(t));
  const pages = new Map<string, string>();
  let start = 0;
  let cursor = '';
  while (start < tools.length) {
    let body = '{"tools":[';
    let i = start;
    for (; i < tools.length; i++) {
      const tj = json[i]! + ',';
      if (Buffer.byteLength(body) + Buffer.byteLength(tj) + 30 > PAGE_BUDGET) break;
      body += tj;
    }
    if (i === start) throw new Error(`tool ${tools[i]!.name} does not fit a page`);
    body = body.slice(0, -1);
    const next = i < tools.length ? tools[i]!.name : '';
    body += next === '' ? ']}' : `],"nextCursor":"${next}"}`;
    pages.set(cursor, body);
    cursor = next;
    start = i;
  }
  return pages;
}

/** The smallest catalog of this shape that takes exactly two pages, plus a few tools on page two. */
export function benchCatalog(): Catalog {
  for (let extra = 0; extra < 200; extra++) {
    const pages = paginate(toolsFor(extra));
    if (pages.size === 2) {
      const tools = toolsFor(extra + 4);
      const final = paginate(tools);
      if (final.size !== 2) continue;
      return { pages: final, toolNames: new Set(tools.map((t) => t.name)), pageCount: 2 };
    }
  }
  throw new Error('no two-page catalog');
}
