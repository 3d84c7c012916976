import { ProtocolError, SdkError, SdkErrorCode, SdkHttpError, SseError, UnauthorizedError } from '@modelcontextprotocol/client';
import { RESULT_TOO_LARGE } from '../stdio-transport.js';

/** What went wrong with a request to a hosted server, told apart by the SDK's error classes and codes. */
export type UpstreamFailure =
  /** The server answered the HTTP request itself with this status (not a JSON-RPC error). */
  | { kind: 'http'; status: number }
  /** 401/403: the credentials were refused. */
  | { kind: 'credentials'; status: number }
  /** No HTTP answer at all: connection refused or reset, no route, DNS. */
  | { kind: 'unreachable' }
  | { kind: 'timeout' }
  /** The connection (or the stdio process) ended while the request was open, or was not up. */
  | { kind: 'closed' }
  /** The answer was over mcp.maxResultBytes (made up by our stdio transport). */
  | { kind: 'too_large' }
  /** A JSON-RPC error from the server. */
  | { kind: 'rejected'; code: number }
  /** The stdio command could not be started. */
  | { kind: 'spawn'; code: string }
  | { kind: 'other' };

export function classifyFailure(e: unknown): UpstreamFailure {
  if (e instanceof UnauthorizedError) return { kind: 'credentials', status: 401 };
  if (e instanceof SdkHttpError) {
    const status = e.status;
    if (e.code === SdkErrorCode.ClientHttpAuthentication || e.code === SdkErrorCode.ClientHttpForbidden || status === 401 || status === 403)
      return { kind: 'credentials', status };
    return { kind: 'http', status };
  }
  if (e instanceof SseError && typeof e.code === 'number')
    return e.code === 401 || e.code === 403 ? { kind: 'credentials', status: e.code } : { kind: 'http', status: e.code };
  if (e instanceof SdkError) {
    if (e.code === SdkErrorCode.RequestTimeout) return { kind: 'timeout' };
    if (e.code === SdkErrorCode.ConnectionClosed || e.code === SdkErrorCode.NotConnected) return { kind: 'closed' };
    return { kind: 'other' };
  }
  if (e instanceof ProtocolError) return e.code === RESULT_TOO_LARGE ? { kind: 'too_large' } : { kind: 'rejected', code: e.code };
  // fetch (undici) reports every network failure as a TypeError whose cause is the system error.
  if (e instanceof TypeError && e.cause instanceof Error) return { kind: 'unreachable' };
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  if (typeof code === 'string' && (e as NodeJS.ErrnoException).syscall?.startsWith('spawn')) return { kind: 'spawn', code };
  return { kind: 'other' };
}

/**
 * A Streamable HTTP server that no longer knows our session answers the request itself with a 4xx
 * (404 as the spec says; 400 from servers such as server-everything), or cannot be reached at all (it
 * restarted): initialize a new session to learn which. Credentials, size and rate refusals are not that.
 */
export function sessionMayBeLost(f: UpstreamFailure): boolean {
  if (f.kind === 'unreachable') return true;
  return f.kind === 'http' && f.status >= 400 && f.status < 500 && ![405, 406, 413, 415, 429].includes(f.status);
}

export interface FailureContext {
  server: string;
  type: string;
  command: string | undefined;
  /** The last line the stdio server wrote to stderr. */
  stderrTail: string | undefined;
}

/** One line for `lastError` and the logs. */
export function describeFailure(e: unknown, c: FailureContext, f = classifyFailure(e)): string {
  if (f.kind === 'credentials') return `the server refused the credentials (HTTP ${f.status})`;
  if (f.kind === 'spawn' && f.code === 'ENOENT') return `command not found: ${c.command}`;
  const msg = e instanceof Error ? e.message : String(e);
  return f.kind === 'closed' && c.stderrTail && c.type === 'stdio' ? `${msg} (stderr: ${c.stderrTail})` : msg;
}

/** The sentence a caller (often a model) reads when a call failed past the gateway. */
export function describeCallFailure(
  e: unknown,
  c: FailureContext,
  timeoutMs: number,
): { code: 'UPSTREAM_TIMEOUT' | 'UPSTREAM_UNAVAILABLE' | 'UPSTREAM_ERROR'; text: string } {
  const f = classifyFailure(e);
  const name = c.server;
  const msg = e instanceof Error ? e.message : String(e);
  switch (f.kind) {
    case 'timeout':
      return { code: 'UPSTREAM_TIMEOUT', text: `The tool server "${name}" did not answer within ${Math.round(timeoutMs / 1000)} s. Try again later.` };
    case 'closed':
      return { code: 'UPSTREAM_UNAVAILABLE', text: `The tool server "${name}" stopped while handling the request. Try again in a moment.` };
    case 'credentials':
      return {
        code: 'UPSTREAM_ERROR',
        text: `The tool server "${name}" refused the credentials (HTTP ${f.status}): the access token is missing, invalid or expired.`,
      };
    case 'too_large':
      return { code: 'UPSTREAM_ERROR', text: tooLargeText(name, stripRpcPrefix(msg)) };
    case 'rejected':
      return { code: 'UPSTREAM_ERROR', text: `The tool server "${name}" rejected the call: ${msg}` };
    default:
      return { code: 'UPSTREAM_UNAVAILABLE', text: `The tool server "${name}" could not be reached: ${describeFailure(e, c, f)}` };
  }
}

export function tooLargeText(server: string, why: string): string {
  return `The tool server "${server}" answered with a result too large to pass on: ${why}. Ask for less (a narrower query, fewer items).`;
}

/** The SDK prefixes a JSON-RPC error's message with "MCP error <code>: "; the reader needs only the reason. */
function stripRpcPrefix(message: string): string {
  return message.replace(/^MCP error -?\d+: /, '');
}
