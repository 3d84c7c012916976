/**
 * Every failure a caller can see, by its stable code. A domain error carries only its code; each edge
 * translates it: HTTP problems (api/problem.ts), tool results (hub/tool-result.ts), JSON-RPC errors
 * (facade/protocol-error.ts).
 */
export const ERROR_CODES = [
  'UNAUTHORIZED',
  /** A valid key asked for something only an operator key (one without a tenant) may do. */
  'FORBIDDEN',
  'NOT_FOUND',
  'DEVICE_NOT_FOUND',
  'TOOL_NOT_FOUND',
  'SERVER_NOT_FOUND',
  'MISSING_TOKEN',
  'INVALID_REQUEST',
  'PAYLOAD_TOO_LARGE',
  'UNSUPPORTED_MEDIA_TYPE',
  'INVALID_ARGUMENTS',
  'DEVICE_BUSY',
  'TOO_MANY_STREAMS',
  'RATE_LIMITED',
  'DEVICE_ERROR',
  'DEVICE_OFFLINE',
  'DEVICE_NOT_READY',
  'DEVICE_TIMEOUT',
  'UPSTREAM_UNAVAILABLE',
  'UPSTREAM_ERROR',
  'UPSTREAM_TIMEOUT',
  'SHUTTING_DOWN',
  'INTERNAL',
  'ENROLLMENT_NOT_FOUND',
  'ENROLLMENT_REFUSED',
  'ENROLLMENT_REJECTED',
  'ENROLLMENT_BUSY',
  'MODEL_NOT_FOUND',
  'MODEL_ERROR',
  'MODEL_TIMEOUT',
  /** The gateway-wide bound on requests to a model service (modelRequests) is reached: try again after Retry-After. */
  'MODEL_BUSY',
  'CONVERSATION_BUSY',
  'TOO_MANY_TURNS',
  /** The caller went away or cancelled the turn. */
  'CANCELLED',
  /** Queued calls (fleet/): a device's queue or the total is full; a call already sent or finished; too many jobs running. */
  'QUEUE_FULL',
  'CALL_FINISHED',
  'TOO_MANY_JOBS',
  /** MCP endpoints (hub/endpoints.ts): the tenant's or the gateway's cap on endpoint tokens is reached. */
  'TOO_MANY_ENDPOINTS',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export class GatewayError extends Error {
  constructor(
    readonly code: ErrorCode,
    detail: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(detail);
    this.name = 'GatewayError';
  }
}
