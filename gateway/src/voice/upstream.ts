import { checkJsonBounds, describeIssues, tryParseJson, UpstreamHelloSchema, type UpstreamHello } from '@voxgate/protocol';
import { WebSocket } from 'ws';

/** A voice server message is at most this large (JSON and audio); a bigger one closes the upstream. */
export const UPSTREAM_MAX_MESSAGE_BYTES = 256 * 1024;
const UPSTREAM_JSON_LIMITS = { maxDepth: 32, maxBytes: UPSTREAM_MAX_MESSAGE_BYTES };

export type UpstreamFailure = 'upstream_refused' | 'upstream_timeout' | 'upstream_error';

export class UpstreamError extends Error {
  constructor(
    readonly reason: UpstreamFailure,
    detail: string,
  ) {
    super(detail);
  }
}

/** The voice server's MCP requests kept from before its hello, at most; later ones are dropped. */
export const UPSTREAM_EARLY_MCP_MAX = 8;

export interface UpstreamOpen {
  ws: WebSocket;
  hello: UpstreamHello;
  /**
   * `mcp` messages that came before the hello, in order. xiaozhi-esp32-server starts its device MCP client (the
   * initialize) as it answers the device's hello, and the initialize can reach the socket first (its PR #3350
   * reorders this); dropped, the server waits for its answer for the rest of the session and lists no device tool.
   */
  early: Array<Record<string, unknown>>;
}

/**
 * Open the voice server's WebSocket, send the hello, and wait for its hello, all within `timeoutMs`.
 * Rejects with an UpstreamError (never with the credentials in its text); the socket is then gone.
 */
export function openUpstream(url: string, headers: Record<string, string>, hello: Record<string, unknown>, timeoutMs: number): Promise<UpstreamOpen> {
  const ws = new WebSocket(url, { headers, perMessageDeflate: false, maxPayload: UPSTREAM_MAX_MESSAGE_BYTES, handshakeTimeout: timeoutMs });
  return new Promise<UpstreamOpen>((resolve, reject) => {
    const early: Array<Record<string, unknown>> = [];
    const fail = (reason: UpstreamFailure, detail: string) => {
      clearTimeout(timer);
      ws.removeAllListeners('message');
      ws.on('error', () => undefined);
      ws.terminate();
      reject(new UpstreamError(reason, detail));
    };
    const timer = setTimeout(() => fail('upstream_timeout', `no hello from the voice server within ${timeoutMs} ms`), timeoutMs);
    ws.once('unexpected-response', (_req, res) => {
      res.resume();
      fail('upstream_refused', `the voice server answered the upgrade with HTTP ${res.statusCode ?? 0}`);
    });
    ws.once('error', (e: Error & { code?: string }) => fail('upstream_error', `voice server connection failed (${e.code ?? e.message})`));
    ws.once('close', (code: number) => fail('upstream_error', `the voice server closed the connection before its hello (${code})`));
    ws.once('open', () => ws.send(JSON.stringify(hello)));
    ws.on('message', (data, isBinary) => {
      if (isBinary) return; // audio before the hello has nowhere to go yet
      const text = data.toString();
      if (!checkJsonBounds(text, UPSTREAM_JSON_LIMITS).ok) return fail('upstream_error', 'the voice server sent an oversized or too deeply nested message');
      const parsed = tryParseJson(text);
      if (!parsed.ok) return;
      const type = (parsed.value as { type?: unknown } | null)?.type;
      if (type === 'mcp' && early.length < UPSTREAM_EARLY_MCP_MAX) early.push(parsed.value as Record<string, unknown>);
      if (type !== 'hello') return;
      const h = UpstreamHelloSchema.safeParse(parsed.value);
      if (!h.success) return fail('upstream_error', `the voice server's hello is not valid: ${describeIssues(h.error.issues)}`);
      clearTimeout(timer);
      ws.removeAllListeners('message');
      ws.removeAllListeners('close');
      ws.removeAllListeners('error');
      ws.removeAllListeners('unexpected-response');
      resolve({ ws, hello: h.data, early });
    });
  });
}

/** A voice server JSON message, bounded and parsed; undefined when it is not a JSON object. */
export function parseUpstreamJson(text: string): Record<string, unknown> | undefined {
  if (!checkJsonBounds(text, UPSTREAM_JSON_LIMITS).ok) return undefined;
  const p = tryParseJson(text);
  return p.ok && typeof p.value === 'object' && p.value !== null && !Array.isArray(p.value) ? (p.value as Record<string, unknown>) : undefined;
}
