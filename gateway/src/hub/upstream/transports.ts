import { AsyncLocalStorage } from 'node:async_hooks';
import { SSEClientTransport, StreamableHTTPClientTransport, type Transport } from '@modelcontextprotocol/client';
import type { ServerConfig } from '../config.js';
import { fillHeaders } from '../credentials.js';
import { guardedFetch } from '../ssrf.js';
import { ChildStdioTransport } from '../stdio-transport.js';
import type { HubSettings } from './base.js';
import { messageBound } from './result-cap.js';

/** Headers for the HTTP request being made right now on behalf of one call (its caller's tokens). */
const callHeaders = new AsyncLocalStorage<Record<string, string>>();

/** Run `fn` so that every HTTP request it makes to a hosted server carries `headers`. */
export function withHeaders<T>(headers: Record<string, string>, fn: () => Promise<T>): Promise<T> {
  return callHeaders.run(headers, fn);
}

export interface TransportHooks {
  onOversized: (info: { bytes: number; id: string | number | undefined }) => void;
  onStderr: (line: string) => void;
}

/** The SDK transport for a server: our own stdio transport (process groups), or Streamable HTTP / SSE through the SSRF guard. */
export function makeTransport(c: ServerConfig, s: HubSettings, hooks: TransportHooks): Transport {
  if (c.type === 'stdio') {
    return new ChildStdioTransport({
      command: c.command!,
      args: c.args,
      env: c.env,
      ...(c.cwd ? { cwd: c.cwd } : {}),
      killGraceMs: s.killGraceMs,
      maxMessageBytes: messageBound(s.maxResultBytes),
      maxResultBytes: s.maxResultBytes,
      onOversized: hooks.onOversized,
      onStderr: hooks.onStderr,
    });
  }
  const allowPrivate = c.allowPrivateNetwork ?? s.allowPrivateNetwork;
  // Headers: the template filled with the current call's tokens, or (no call: connect, listing) the
  // headers whose placeholders need no token.
  const fetchFn = guardedFetch(allowPrivate, () => callHeaders.getStore() ?? fillHeaders(c.headersTemplate, undefined, c.name, true));
  const url = new URL(c.url!);
  return c.type === 'sse' ? new SSEClientTransport(url, { fetch: fetchFn }) : new StreamableHTTPClientTransport(url, { fetch: fetchFn });
}
