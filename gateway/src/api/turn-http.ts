import type { FastifyReply, FastifyRequest } from 'fastify';
import { TurnCancelled } from '../assistant/turn.js';
import { ERRORS, GatewayError } from '../errors.js';
import { mergeTokens, parseTokens, parseTokensHeader } from '../hub/credentials.js';

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

/** Open an SSE response on a hijacked reply. */
export function openSse(reply: FastifyReply): (event: string, data: unknown) => void {
  reply.hijack();
  reply.raw.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache, no-transform', connection: 'keep-alive', 'x-accel-buffering': 'no' });
  return (event, data) => {
    if (!reply.raw.destroyed) reply.raw.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  };
}

export function failure(e: unknown): { code: string; status: number; detail: string } {
  if (e instanceof GatewayError) return { code: e.code, status: e.status, detail: e.message };
  if (e instanceof TurnCancelled) return { code: 'CANCELLED', status: 499, detail: e.message };
  return { code: 'INTERNAL', status: ERRORS.INTERNAL.status, detail: 'internal error; see the gateway log' };
}
