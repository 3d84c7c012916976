import type { ServerResponse } from 'node:http';
import type { LevelLog } from '../throttle/throttled-log.js';
import { UnreadTotal, type UnreadShare } from '../hub/unread-total.js';
import type { Metrics } from '../metrics.js';

/**
 * What every /mcp response together may hold of what its client has not read, unless `mcp.endpoint.unreadBudgetBytes`
 * says otherwise: 64 streams at their own bound (`MAX_UNREAD_BYTES`, 1 MiB), dozens of the largest answers on their way
 * at once. A client that reads what it is sent holds next to nothing; 1000 sessions (`maxSessions`) whose clients
 * stopped reading held 1 GiB before.
 */
export const DEFAULT_ENDPOINT_UNREAD_BUDGET = 64 * 1024 * 1024;

/** The /mcp total's warnings (hub/unread-total.ts writes them, a line a minute per group and outcome). */
const LINES = {
  refused:
    'MCP endpoint unread budget full (mcp.endpoint.unreadBudgetBytes): a /mcp response of the tenant or key holding the most of it cut instead of written (an SSE stream resumes with Last-Event-ID)',
  cut: 'MCP endpoint unread budget full (mcp.endpoint.unreadBudgetBytes): a /mcp response of the tenant or key holding the most cut, to make room for another',
};

/**
 * The gateway's one total of what /mcp's clients leave unread: its own budget, metrics (`voxgate_mcp_endpoint_unread_*`)
 * and lines, apart from the hub's total (hub/unread-total.ts), so that MCP clients that stop reading never cut a
 * hosted server or a tool process, nor they a client's stream.
 */
export function endpointUnreadTotal(maxBytes: number | undefined, log: LevelLog, metrics: Metrics): UnreadTotal {
  return new UnreadTotal(maxBytes ?? DEFAULT_ENDPOINT_UNREAD_BUDGET, {
    log,
    metrics: { hubUnreadBytes: metrics.mcpEndpointUnreadBytes, hubUnreadPeak: metrics.mcpEndpointUnreadPeak, hubUnreadFull: metrics.mcpEndpointUnreadFull },
    lines: LINES,
  });
}

/**
 * A response's group in the /mcp total: its tenant's (every key and session of it together), or for a key without a
 * tenant the key's own (its principal, a hash). The group holding the most gives way first.
 */
export const unreadGroup = (tenant: string | undefined, principal: string): string => (tenant === undefined ? `key:${principal}` : `tenant:${tenant}`);

type Callback = (err?: Error | null) => void;

const sizeOf = (chunk: unknown, encoding: unknown): number =>
  typeof chunk === 'string'
    ? Buffer.byteLength(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8')
    : chunk instanceof Uint8Array
      ? chunk.byteLength
      : 0;

/**
 * Counts what is written on `res` in `total`, from each write until the socket has taken it (the write's callback; an
 * `end` with data: its 'finish'). A write that does not fit (its group holds the most) cuts the response instead of
 * queuing it, as a cut for another's write does: its connection is destroyed, and what waited for it goes with it. A
 * session's SSE events stay in its event store: the client resumes with Last-Event-ID (the SDK's client does at once).
 * The count ends when the response or its connection closes (a pipelined response may never see its own 'close').
 */
export function countUnread(res: ServerResponse, total: UnreadTotal, place: { group: string; who: Record<string, unknown> }): void {
  const socket = res.req?.socket;
  const cut = () => {
    socket?.destroy();
    res.destroy();
  };
  const share: UnreadShare = total.join(place, cut);
  const leave = () => share.leave();
  socket?.once('close', leave);
  res.once('close', () => {
    socket?.off('close', leave);
    leave();
  });
  const write = res.write.bind(res) as (...args: unknown[]) => boolean;
  const end = res.end.bind(res) as (...args: unknown[]) => ServerResponse;
  res.write = ((chunk: unknown, a?: unknown, b?: unknown) => {
    const callback = (typeof a === 'function' ? a : b) as Callback | undefined;
    const encoding = typeof a === 'string' ? a : undefined;
    const bytes = sizeOf(chunk, encoding);
    if (bytes === 0) return write(chunk, encoding, callback);
    if (!share.take(bytes)) {
      cut();
      return false;
    }
    return write(chunk, encoding, (err?: Error | null) => {
      share.give(bytes);
      callback?.(err);
    });
  }) as ServerResponse['write'];
  res.end = ((chunk?: unknown, a?: unknown, b?: unknown) => {
    if (typeof chunk === 'function') return end(chunk);
    const callback = (typeof a === 'function' ? a : b) as Callback | undefined;
    const encoding = typeof a === 'string' ? a : undefined;
    const bytes = sizeOf(chunk, encoding);
    if (bytes === 0) return end(chunk, encoding, callback);
    if (!share.take(bytes)) {
      cut();
      return res;
    }
    return end(chunk, encoding, () => {
      share.give(bytes);
      callback?.();
    });
  }) as ServerResponse['end'];
}
