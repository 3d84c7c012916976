import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import { ERRORS, GatewayError, type ErrorCode } from '../errors.js';

/** RFC 9457 problem details with a stable `code`, for every error the API returns. */
export function sendProblem(reply: FastifyReply, code: ErrorCode, detail: string, extra: Record<string, unknown> = {}): FastifyReply {
  const { status, title } = ERRORS[code];
  return reply
    .code(status)
    .type('application/problem+json')
    .send({ type: `urn:voxgate:error:${code}`, title, status, detail, code, instance: reply.request.url.split('?')[0], ...extra });
}

const CLIENT_ERRORS: Partial<Record<number, ErrorCode>> = { 404: 'NOT_FOUND', 413: 'PAYLOAD_TOO_LARGE', 415: 'UNSUPPORTED_MEDIA_TYPE' };

export function registerProblemHandlers(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError | GatewayError, req, reply) => {
    if (err instanceof GatewayError) {
      // A caller told to come back later also hears when, the standard way.
      const retry = err.extra['retryAfterSeconds'];
      if (typeof retry === 'number') void reply.header('retry-after', String(Math.ceil(retry)));
      return sendProblem(reply, err.code, err.message, err.extra);
    }
    if ((err as FastifyError).validation) return sendProblem(reply, 'INVALID_REQUEST', err.message);
    const status = (err as FastifyError).statusCode ?? 500;
    if (status >= 400 && status < 500) return sendProblem(reply, CLIENT_ERRORS[status] ?? 'INVALID_REQUEST', err.message);
    req.log.error({ err }, 'unhandled error');
    return sendProblem(reply, 'INTERNAL', 'internal error; see the gateway log');
  });
  app.setNotFoundHandler((req, reply) => sendProblem(reply, 'NOT_FOUND', `no route ${req.method} ${req.url.split('?')[0]}`));
}
