/** What each problem code means for the person at the console, and what to try. */
const EXPLAIN: Record<string, string> = {
  UNAUTHORIZED: 'The API key is missing or not valid. Sign in again with a key from GATEWAY_API_KEYS.',
  NOT_FOUND: 'No such route or resource.',
  DEVICE_NOT_FOUND: 'No device with this id has connected since the gateway started.',
  TOOL_NOT_FOUND: 'The device (or server) has no tool by this name. Its catalog may have changed: reload.',
  SERVER_NOT_FOUND: 'No hosted MCP server by this name.',
  MISSING_TOKEN: 'The hosted server needs a credential for this call.',
  INVALID_REQUEST: 'The request was malformed; the detail says which part.',
  PAYLOAD_TOO_LARGE: "The request body is over the gateway's limit.",
  UNSUPPORTED_MEDIA_TYPE: 'The request body must be JSON.',
  INVALID_ARGUMENTS: "The arguments do not match the tool's inputSchema; the detail names the field.",
  DEVICE_BUSY: "The device's call queue is full: it runs one tool at a time. Retry shortly.",
  TOO_MANY_STREAMS: 'Too many event streams are open for this key. Close another console tab.',
  RATE_LIMITED: 'Too many requests; retry later.',
  DEVICE_ERROR: 'The device answered with an error (its own message is in the detail).',
  DEVICE_OFFLINE: 'The device is not connected, or has not finished initializing.',
  DEVICE_TIMEOUT: 'The device did not answer in time. It may be busy or its link may be slow.',
  UPSTREAM_UNAVAILABLE: 'The hosted MCP server is not running.',
  UPSTREAM_ERROR: 'The hosted MCP server answered with an error.',
  UPSTREAM_TIMEOUT: 'The hosted MCP server did not answer in time.',
  SHUTTING_DOWN: 'The gateway is shutting down.',
  INTERNAL: 'The gateway failed unexpectedly; its log has the details.',
  ENROLLMENT_NOT_FOUND: 'No such enrollment (the code expired, or device auth is open).',
  ENROLLMENT_REFUSED: 'The enrollment policy refuses this device.',
  ENROLLMENT_REJECTED: 'An operator rejected this device.',
  ENROLLMENT_BUSY: 'Too many devices are waiting for approval.',
  NETWORK: 'The browser could not reach the gateway.',
  MODEL_NOT_FOUND: 'No assistant model by this name (or none is configured): see assistant.models.',
  MODEL_ERROR: "The model's provider answered with an error (its message is in the detail).",
  MODEL_TIMEOUT: 'The model did not answer in time (assistant.modelTimeoutMs), or the whole turn ran past assistant.turnTimeoutMs.',
  CONVERSATION_BUSY: 'A turn is already running in this conversation. Wait for it or cancel it.',
  TOO_MANY_TURNS: 'Too many assistant turns are running; retry shortly.',
  CANCELLED: 'The turn was cancelled.',
};

export function explain(code: string): string {
  return EXPLAIN[code] ?? 'See the detail.';
}
