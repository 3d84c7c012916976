import type { FastifyReply, FastifyRequest } from 'fastify';
import { TurnCancelled } from '../assistant/turn-types.js';
import { GatewayError } from '../errors.js';
import { httpStatusOf } from './problem.js';
import { mergeTokens, parseTokens, parseTokensHeader } from '../hub/credentials.js';
import type { SseAnswers, SseWriter } from './sse-writer.js';

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

/**
 * Open a turn's SSE answer on a hijacked reply. A caller that leaves more than the bound unread is cut and its turn
 * cancelled, as a disconnect does: no model keeps talking (and billing) for nobody.
 */
export function openTurnSse(answers: SseAnswers, reply: FastifyReply, turn: { id: string; cancel(reason: string): void }, heartbeat = true): SseWriter {
  const onCut = () => turn.cancel('the caller stopped reading its stream');
  return answers.open(reply, { reason: 'slow_turn', fields: { turnId: turn.id }, onCut, heartbeat });
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
