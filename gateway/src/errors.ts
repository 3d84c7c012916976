/** Every failure a caller can see, with its stable code and HTTP status. */
export const ERRORS = {
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
  HUB_DISABLED: { status: 503, title: 'MCP hub disabled' },
  SHUTTING_DOWN: { status: 503, title: 'Shutting down' },
  INTERNAL: { status: 500, title: 'Internal error' },
  ENROLLMENT_NOT_FOUND: { status: 404, title: 'Enrollment not found' },
  ENROLLMENT_REFUSED: { status: 403, title: 'Enrollment refused' },
  ENROLLMENT_REJECTED: { status: 403, title: 'Enrollment rejected by an operator' },
  ENROLLMENT_BUSY: { status: 503, title: 'Too many pending enrollments' },
  MODEL_NOT_FOUND: { status: 404, title: 'Model not found' },
  MODEL_ERROR: { status: 502, title: 'Model error' },
  MODEL_TIMEOUT: { status: 504, title: 'Model timeout' },
  CONVERSATION_BUSY: { status: 409, title: 'Conversation busy' },
  TOO_MANY_TURNS: { status: 429, title: 'Too many turns' },
  /** The caller went away or cancelled the turn (nginx's "client closed request"). */
  CANCELLED: { status: 499, title: 'Cancelled' },
} as const;

export type ErrorCode = keyof typeof ERRORS;

export class GatewayError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    detail: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(detail);
    this.name = 'GatewayError';
    this.status = ERRORS[code].status;
  }
}
