import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import { GatewayError, type ErrorCode } from '../errors.js';

/** The HTTP face of every domain error code: its status and the problem's title. */
export const HTTP_PROBLEMS: Record<ErrorCode, { status: number; title: string }> = {
  UNAUTHORIZED: { status: 401, title: 'Unauthorized' },
  FORBIDDEN: { status: 403, title: 'Forbidden' },
  NOT_FOUND: { status: 404, title: 'Not found' },
  DEVICE_NOT_FOUND: { status: 404, title: 'Device not found' },
  TOOL_NOT_FOUND: { status: 404, title: 'Tool not found' },
  SERVER_NOT_FOUND: { status: 404, title: 'MCP server not found' },
  MISSING_TOKEN: { status: 400, title: 'Missing token' },
  INVALID_REQUEST: { status: 400, title: 'Invalid request' },
  PAYLOAD_TOO_LARGE: { status: 413, title: 'Payload too large' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, title: 'Unsupported media type' },
  INVALID_ARGUMENTS: { status: 422, title: 'Invalid arguments' },
  DEVICE_BUSY: { status: 429, title: 'Device busy' },
  TOO_MANY_STREAMS: { status: 429, title: 'Too many event streams' },
  RATE_LIMITED: { status: 429, title: 'Too many requests' },
  DEVICE_ERROR: { status: 502, title: 'Device error' },
  DEVICE_OFFLINE: { status: 503, title: 'Device offline' },
  DEVICE_NOT_READY: { status: 503, title: 'Device still initializing' },
  DEVICE_TIMEOUT: { status: 504, title: 'Device timeout' },
  UPSTREAM_UNAVAILABLE: { status: 503, title: 'Upstream MCP server unavailable' },
  UPSTREAM_ERROR: { status: 502, title: 'Upstream MCP server error' },
  UPSTREAM_TIMEOUT: { status: 504, title: 'Upstream MCP server timeout' },
  SHUTTING_DOWN: { status: 503, title: 'Shutting down' },
  INTERNAL: { status: 500, title: 'Internal error' },
  ENROLLMENT_NOT_FOUND: { status: 404, title: 'Enrollment not found' },
  ENROLLMENT_REFUSED: { status: 403, title: 'Enrollment refused' },
  ENROLLMENT_REJECTED: { status: 403, title: 'Enrollment rejected by an operator' },
  ENROLLMENT_BUSY: { status: 503, title: 'Too many pending enrollments' },
  MODEL_NOT_FOUND: { status: 404, title: 'Model not found' },
  MODEL_ERROR: { status: 502, title: 'Model error' },
  MODEL_TIMEOUT: { status: 504, title: 'Model timeout' },
  MODEL_BUSY: { status: 503, title: 'Model service busy' },
  CONVERSATION_BUSY: { status: 409, title: 'Conversation busy' },
  TOO_MANY_TURNS: { status: 429, title: 'Too many turns' },
  /** nginx's "client closed request". */
  CANCELLED: { status: 499, title: 'Cancelled' },
  QUEUE_FULL: { status: 429, title: 'Call queue full' },
  CALL_FINISHED: { status: 409, title: 'Call already sent or finished' },
  TOO_MANY_JOBS: { status: 429, title: 'Too many jobs running' },
  TOO_MANY_ENDPOINTS: { status: 409, title: 'Too many MCP endpoints' },
};

export const httpStatusOf = (code: ErrorCode): number => HTTP_PROBLEMS[code].status;

/** RFC 9457 problem details with a stable `code`, for every error the API returns. */
export function sendProblem(reply: FastifyReply, code: ErrorCode, detail: string, extra: Record<string, unknown> = {}): FastifyReply {
  const { status, title } = HTTP_PROBLEMS[code];
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
    if ((err as FastifyError).validation) return sendProblem(reply, 'INVALID_REQUEST', validationDetail(err as FastifyError));
    const status = (err as FastifyError).statusCode ?? 500;
    if (status >= 400 && status < 500) return sendProblem(reply, CLIENT_ERRORS[status] ?? 'INVALID_REQUEST', err.message);
    req.log.error({ err }, 'unhandled error');
    return sendProblem(reply, 'INTERNAL', 'internal error; see the gateway log');
  });
  app.setNotFoundHandler((req, reply) => sendProblem(reply, 'NOT_FOUND', `no route ${req.method} ${req.url.split('?')[0]}`));
}

/** Ajv's "must NOT have additional properties" does not say which: name the key, as a person needs. */
function validationDetail(err: FastifyError): string {
  const extra = err.validation?.find((v) => v.keyword === 'additionalProperties');
  const key = extra?.params['additionalProperty'];
  return typeof key === 'string' ? `${err.message}: unknown key ${JSON.stringify(key.slice(0, 64))}` : err.message;
}
