/**
 * MCP load over Streamable HTTP, the same for every server measured: raw JSON-RPC POSTs on one keep-alive
 * socket per session (initialize, notifications/initialized, then tools/call after tools/call, each awaited),
 * answers read as JSON or as an SSE stream, whichever the server chose. No SDK client and no node:http client on
 * the load side (raw-http.ts), so the load generator costs every server the same and little CPU.
 */
import { RawHttpConnection } from './raw-http.js';
import { pooled, quantile } from './samples.js';

const PROTOCOL_VERSION = '2025-06-18';

interface Answer {
  status: number;
  headers: Record<string, string>;
  /** The JSON-RPC response to the request (null for a notification or a DELETE). */
  message: { result?: unknown; error?: unknown } | null;
}

/** What the load drives: an MCP session over Streamable HTTP, or a logical one on a direct stdio pipe (mcp-direct.ts). */
export interface LoadSession {
  open(): Promise<void>;
  call(name: string, args: Record<string, unknown>): Promise<void>;
  close(): Promise<void>;
}

export class McpLoadSession implements LoadSession {
  private readonly connection: RawHttpConnection;
  /** The header lines every request sends (the session's, once it has one). */
  private fixedHeaders: string;
  private sessionId: string | undefined;
  private nextId = 1;

  constructor(
    private readonly url: URL,
    headers: Record<string, string> = {},
  ) {
    this.connection = new RawHttpConnection(url.hostname, Number(url.port || 80));
    this.fixedHeaders = headerLines({ ...headers, accept: 'application/json, text/event-stream' });
  }

  async open(): Promise<void> {
    const init = await this.post({
      jsonrpc: '2.0',
      id: this.nextId++,
      method: 'initialize',
      params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'voxgate-bench', version: '1.0.0' } },
    });
    const sid = init.headers['mcp-session-id'];
    if (init.status !== 200 || typeof sid !== 'string' || !init.message?.result)
      throw new Error(`initialize: HTTP ${init.status}, session ${String(sid)}, ${JSON.stringify(init.message).slice(0, 300)}`);
    this.sessionId = sid;
    this.fixedHeaders += headerLines({ 'mcp-session-id': sid, 'mcp-protocol-version': PROTOCOL_VERSION });
    const note = await this.post({ jsonrpc: '2.0', method: 'notifications/initialized' });
    if (note.status !== 202 && note.status !== 200) throw new Error(`notifications/initialized: HTTP ${note.status}`);
  }

  /** One tools/call; throws unless it answered a result that is not a tool error. */
  async call(name: string, args: Record<string, unknown>): Promise<void> {
    const a = await this.post({ jsonrpc: '2.0', id: this.nextId++, method: 'tools/call', params: { name, arguments: args } });
    const result = a.message?.result as { isError?: boolean } | undefined;
    if (a.status !== 200 || !result || result.isError) throw new Error(`tools/call: HTTP ${a.status}, ${JSON.stringify(a.message).slice(0, 300)}`);
  }

  /** DELETE the session (the server releases it), then drop the socket. */
  async close(): Promise<void> {
    try {
      if (this.sessionId !== undefined) await this.send('DELETE', undefined);
    } finally {
      this.connection.close();
    }
  }

  private post(body: Record<string, unknown>): Promise<Answer> {
    return this.send('POST', JSON.stringify(body));
  }

  private async send(method: 'POST' | 'DELETE', body: string | undefined): Promise<Answer> {
    const headers = body === undefined ? this.fixedHeaders : `${this.fixedHeaders}content-type: application/json\r\n`;
    const res = await this.connection.request(method, this.url.pathname + this.url.search, headers, body);
    return { status: res.status, headers: res.headers, message: parseAnswer(res.headers['content-type'] ?? '', res.body) };
  }
}

function headerLines(headers: Record<string, string>): string {
  return Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
}

/** The JSON-RPC response in a JSON body or in an SSE stream's data lines (the last one holding a result or an error). */
function parseAnswer(contentType: string, text: string): Answer['message'] {
  if (text.trim() === '') return null;
  if (!contentType.startsWith('text/event-stream')) return JSON.parse(text) as Answer['message'];
  let found: Answer['message'] = null;
  for (const line of text.split('\n')) {
    if (!line.startsWith('data:')) continue;
    const data = line.slice(5).trim();
    if (data === '') continue;
    const m = JSON.parse(data) as NonNullable<Answer['message']>;
    if ('result' in m || 'error' in m) found = m;
  }
  return found;
}

export interface McpLoadResult {
  /** Every successful call's latency, ms (to merge runs). */
  latencies: number[];
  calls: number;
  failed: number;
  seconds: number;
  perSecond: number;
  p50: number;
  p99: number;
  firstError?: string;
}

/**
 * Every session calls the tool back to back for `seconds`, or until `calls` calls have been sent in all (a warm-up
 * counted in calls: the same work for every system, however fast); latencies in ms.
 */
export async function runMcpLoad(
  sessions: readonly LoadSession[],
  tool: string,
  args: Record<string, unknown>,
  seconds: number,
  calls = Infinity,
): Promise<McpLoadResult> {
  const lat: number[] = [];
  let failed = 0;
  let sent = 0;
  let firstError: string | undefined;
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  await Promise.all(
    sessions.map(async (s) => {
      while (performance.now() < end && sent++ < calls) {
        const c0 = performance.now();
        try {
          await s.call(tool, args);
          lat.push(performance.now() - c0);
        } catch (e) {
          failed++;
          firstError ??= (e as Error).message;
          if (failed > 100) return;
        }
      }
    }),
  );
  return summarize([{ latencies: lat, failed, seconds: (performance.now() - t0) / 1000, ...(firstError !== undefined ? { firstError } : {}) }]);
}

/** Runs taken one after another (slices of one row), as one. */
export function summarize(runs: ReadonlyArray<Pick<McpLoadResult, 'latencies' | 'failed' | 'seconds' | 'firstError'>>): McpLoadResult {
  const latencies = runs.flatMap((r) => r.latencies);
  const seconds = runs.reduce((n, r) => n + r.seconds, 0);
  const failed = runs.reduce((n, r) => n + r.failed, 0);
  const firstError = runs.find((r) => r.firstError !== undefined)?.firstError;
  const sorted = pooled([latencies]);
  return {
    latencies,
    calls: latencies.length,
    failed,
    seconds,
    perSecond: latencies.length / seconds,
    p50: quantile(sorted, 0.5),
    p99: quantile(sorted, 0.99),
    ...(firstError !== undefined ? { firstError } : {}),
  };
}
