import type { FastifyReply, FastifyRequest } from 'fastify';
import { TurnCancelled } from '../assistant/turn.js';
import { GatewayError } from '../errors.js';
import { httpStatusOf } from './problem.js';
import { mergeTokens, parseTokens, parseTokensHeader } from '../hub/credentials.js';
import { writeSseHead } from './sse-head.js';

/** What the assistant's HTTP routes share: tokens, SSE, cancellation on disconnect, failures as codes. */
export function tokensOf(req: FastifyRequest, body?: { tokens?: Record<string, string> | undefined }) {
  return mergeTokens(parseTokensHeader(req.headers['x-voxgate-tokens']), body?.tokens === undefined ? undefined : parseTokens(body.tokens));
}

/** Cancel the turn when the caller goes away before the answer is out. */
export function cancelOnDisconnect(reply: FastifyReply, cancel: () => void): void {
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) cancel();
  });
}

/** Between events a tool may run for long: a comment now and then keeps proxies from closing the stream. */
const HEARTBEAT_MS = 15_000;

/** Open an SSE response on a hijacked reply; the heartbeat stops when the response closes. */
export function openSse(reply: FastifyReply): (event: string, data: unknown) => void {
  reply.hijack();
  const res = reply.raw;
  writeSseHead(res);
  const heartbeat = setInterval(() => res.write(': ping\n\n'), HEARTBEAT_MS);
  res.on('close', () => clearInterval(heartbeat));
  return (event, data) => {
    if (!res.destroyed) res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  };
}

/** A turn's outcome for a JSON reply: a cancelled turn is a problem like any other. */
export async function answerOf<T>(done: Promise<T>): Promise<T> {
  try {
    return await done;
  } catch (e) {
    if (e instanceof TurnCancelled) throw new GatewayError('CANCELLED', e.message);
    throw e;
  }
}

export function failure(e: unknown): { code: string; status: number; detail: string } {
  if (e instanceof GatewayError) return { code: e.code, status: httpStatusOf(e.code), detail: e.message };
  if (e instanceof TurnCancelled) return { code: 'CANCELLED', status: httpStatusOf('CANCELLED'), detail: e.message };
  return { code: 'INTERNAL', status: httpStatusOf('INTERNAL'), detail: 'internal error; see the gateway log' };
}
