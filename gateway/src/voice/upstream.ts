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

export interface UpstreamOpen {
  ws: WebSocket;
  hello: UpstreamHello;
}

/**
 * Open the voice server's WebSocket, send the hello, and wait for its hello, all within `timeoutMs`.
 * Rejects with an UpstreamError (never with the credentials in its text); the socket is then gone.
 */
export function openUpstream(url: string, headers: Record<string, string>, hello: Record<string, unknown>, timeoutMs: number): Promise<UpstreamOpen> {
  const ws = new WebSocket(url, { headers, perMessageDeflate: false, maxPayload: UPSTREAM_MAX_MESSAGE_BYTES, handshakeTimeout: timeoutMs });
  return new Promise<UpstreamOpen>((resolve, reject) => {
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
      if (!parsed.ok || (parsed.value as { type?: unknown } | null)?.type !== 'hello') return;
      const h = UpstreamHelloSchema.safeParse(parsed.value);
      if (!h.success) return fail('upstream_error', `the voice server's hello is not valid: ${describeIssues(h.error.issues)}`);
      clearTimeout(timer);
      ws.removeAllListeners('message');
      ws.removeAllListeners('close');
      ws.removeAllListeners('error');
      ws.removeAllListeners('unexpected-response');
      resolve({ ws, hello: h.data });
    });
  });
}

/** A voice server JSON message, bounded and parsed; undefined when it is not a JSON object. */
export function parseUpstreamJson(text: string): Record<string, unknown> | undefined {
  if (!checkJsonBounds(text, UPSTREAM_JSON_LIMITS).ok) return undefined;
  const p = tryParseJson(text);
  return p.ok && typeof p.value === 'object' && p.value !== null && !Array.isArray(p.value) ? (p.value as Record<string, unknown>) : undefined;
}
