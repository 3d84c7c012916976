import { clientSdk } from './client-sdk.js';
import type { Metrics } from '../metrics.js';
import { ThrottledLog, type LevelLog } from '../throttle/throttled-log.js';
import type { CallsInFlight } from './in-flight.js';
import type { PeerMethod } from './upstream/base.js';

/**
 * A server asks its client something (sampling, elicitation) while it serves calls. Only the caller of a
 * call running on that server may answer, and only when it is the one caller there: with several, the
 * request can't be told apart and goes to nobody (one caller never sees another's). A call made through the HTTP
 * API or the assistant is a caller too, one that cannot answer: while it runs there, the request goes to nobody.
 */
export function routePeerRequest(
  d: { calls: CallsInFlight; metrics: Metrics; refusals: ThrottledLog },
  server: string,
  method: PeerMethod,
  params: Record<string, unknown>,
  signal: AbortSignal,
): Promise<Record<string, unknown>> {
  const peers = d.calls.peersOn(server);
  const refuse = (why: string) => {
    d.metrics.hubCalls.inc({ kind: 'peer_request', outcome: 'refused' });
    d.refusals.write({ server, method, why }, 'request from an MCP server refused', server);
    // Only an upstream MCP server asks: the SDK's client side is loaded (hub/client-sdk.ts).
    const { ProtocolError, ProtocolErrorCode } = clientSdk();
    return Promise.reject(new ProtocolError(ProtocolErrorCode.InvalidRequest, `${method} refused by the Voxgate gateway: ${why}`));
  };
  if (peers.size === 0) return refuse('no MCP client is waiting on a call to this server that could answer it');
  if (peers.size > 1) return refuse('several clients are calling this server at once and the request does not say for which call it is');
  const peer = [...peers.values()][0];
  // The one call running there came through the HTTP API or the assistant: nobody can answer for it.
  if (!peer) return refuse('the call running on this server came from a client that cannot answer requests (the HTTP API or the assistant)');
  if (!peer.supports(method)) return refuse(`the calling MCP client does not support ${method.split('/')[0]}`);
  d.metrics.hubCalls.inc({ kind: 'peer_request', outcome: 'forwarded' });
  return peer.request(method, params, signal);
}

/**
 * The log of refused requests: a line per server per 10 s (the next one says how many were held back). A tool process
 * dialed in on an endpoint may ask 500 times a second (its frame bound), and each refusal was a line of our log.
 */
export const peerRefusalLog = (log: LevelLog): ThrottledLog => new ThrottledLog(log, 'info', { linesPerWindow: 1, windowMs: 10_000, maxKeys: 1024 });
