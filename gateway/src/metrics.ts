import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { bindCounter, bindGauge, bindHistogram } from './metrics-bound.js';

/** Operator counters. No per-device labels: a fleet would explode the series count. */
// eslint-disable-next-line max-lines-per-function -- a table of metric definitions (data): one entry per metric
export function createMetrics() {
  const registry = new Registry();
  // prom-client's default names already say what they are (process_cpu_…, nodejs_heap_…): only the project prefix.
  collectDefaultMetrics({ register: registry, prefix: 'voxgate_' });
  const m = {
    registry,
    devicesConnected: new Gauge({
      name: 'voxgate_devices_connected',
      help: 'Devices connected now',
      labelNames: ['transport'] as const,
      registers: [registry],
    }),
    devicesReady: new Gauge({ name: 'voxgate_devices_ready', help: 'Connected devices whose tool catalog is loaded', registers: [registry] }),
    connections: new Counter({
      name: 'voxgate_device_connections_total',
      help: 'Device connections accepted',
      labelNames: ['transport'] as const,
      registers: [registry],
    }),
    authRefused: new Counter({
      name: 'voxgate_device_auth_refused_total',
      help: 'Device connections refused at authentication',
      labelNames: ['transport', 'reason'] as const,
      registers: [registry],
    }),
    takeovers: new Counter({ name: 'voxgate_device_takeovers_total', help: 'Connections replaced by a newer one for the same device', registers: [registry] }),
    calls: new Counter({ name: 'voxgate_calls_total', help: 'Device calls by outcome', labelNames: ['outcome'] as const, registers: [registry] }),
    callDuration: new Histogram({
      name: 'voxgate_call_duration_seconds',
      help: 'Device call duration, from the request to the reply',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers: [registry],
    }),
    framesIn: new Counter({
      name: 'voxgate_frames_received_total',
      help: 'Frames received from devices',
      labelNames: ['transport', 'kind'] as const,
      registers: [registry],
    }),
    framesRejected: new Counter({
      name: 'voxgate_frames_rejected_total',
      help: "Frames rejected from devices, MQTT clients and tool processes, by reason (e.g. mqtt_protocol: malformed MQTT; mqtt_protocol_level: a CONNECT of an MQTT level other than 3.1 or 3.1.1, answered CONNACK 1, MQTT 5 the v5 CONNACK 0x84; unknown_id: a hosted MCP server's response to no request waiting)",
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    readsPaused: new Counter({
      name: 'voxgate_device_reads_paused_total',
      help: 'Times a device\'s link stopped reading: its unsolicited frames went past its budget (frames.devicePerSecond) or its address\'s (budget="address": frames.addressPerSecond); transport="mcp_endpoint", budget="tenant": a tenant\'s tool processes past mcp.endpoints.readBytesPerSecond; transport="mcp_stdio", budget="server": a stdio server past mcp.stdioReadBytesPerSecond (or its read_bytes_per_second)',
      labelNames: ['transport', 'budget'] as const,
      registers: [registry],
    }),
    audioBytes: new Counter({ name: 'voxgate_audio_bytes_received_total', help: 'Binary (audio) bytes received and not processed', registers: [registry] }),
    toolsPages: new Counter({
      name: 'voxgate_tools_pages_total',
      help: 'tools/list pages received, parsed or taken from the page cache',
      labelNames: ['source'] as const,
      registers: [registry],
    }),
    lateReplies: new Counter({
      name: 'voxgate_late_replies_total',
      help: 'Device replies that matched no pending call (late or unknown id)',
      registers: [registry],
    }),
    visionUploads: new Counter({
      name: 'voxgate_vision_uploads_total',
      help: 'Photos posted to the vision endpoint, by outcome',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    setupRetries: new Counter({
      name: 'voxgate_device_setup_retries_total',
      help: 'Device setup steps (initialize, tools/list pages) retried after a failure',
      labelNames: ['step'] as const,
      registers: [registry],
    }),
    catalogsIncomplete: new Counter({
      name: 'voxgate_device_catalogs_incomplete_total',
      help: 'Device catalogs kept incomplete: the device refused a tools/list page for good, or a byte bound cut the catalog (voxgate_device_catalogs_cut_total)',
      registers: [registry],
    }),
    catalogsCut: new Counter({
      name: 'voxgate_device_catalogs_cut_total',
      help: 'Device catalogs cut or refused by a bound: device_bytes (session.maxCatalogBytes), device_tools (session.maxTools), device_pages (session.maxToolPages), gateway_budget (devices.catalogBudgetBytes full)',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    catalogBytes: new Gauge({
      name: 'voxgate_device_catalog_bytes',
      help: 'Bytes of the device catalogs held now (identical catalogs once), against devices.catalogBudgetBytes',
      registers: [registry],
    }),
    events: new Counter({ name: 'voxgate_events_total', help: 'Events published on the bus', labelNames: ['type'] as const, registers: [registry] }),
    sseClients: new Gauge({ name: 'voxgate_sse_clients', help: 'Open SSE streams', registers: [registry] }),
    hubConnects: new Counter({
      name: 'voxgate_mcp_server_connects_total',
      help: 'Upstream MCP server start attempts at hub start, by outcome',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    hubServerStates: new Counter({
      name: 'voxgate_mcp_server_state_changes_total',
      help: 'Upstream MCP server state changes, by new state',
      labelNames: ['state'] as const,
      registers: [registry],
    }),
    hubOversized: new Counter({
      name: 'voxgate_mcp_server_oversized_messages_total',
      help: 'Messages from stdio MCP servers over mcp.maxResultBytes, skipped',
      registers: [registry],
    }),
    hubUnread: new Counter({
      name: 'voxgate_mcp_server_unread_total',
      help: "Hosted MCP servers and tool processes that left more than the bound unread of what the gateway writes them, by transport: a WebSocket (a tool process on an MCP endpoint, a dialed server, a publish target) is cut; a stdio server's message is refused, and the call it carried fails",
      labelNames: ['transport'] as const,
      registers: [registry],
    }),
    hubUnreadBytes: new Gauge({
      name: 'voxgate_mcp_unread_bytes',
      help: 'Bytes the gateway wrote to hosted MCP servers and tool processes that their sockets and pipes have not taken yet, all together, against mcp.unreadBudgetBytes',
      registers: [registry],
    }),
    hubUnreadPeak: new Gauge({
      name: 'voxgate_mcp_unread_bytes_peak',
      help: 'The most voxgate_mcp_unread_bytes has been since the gateway started (never past mcp.unreadBudgetBytes)',
      registers: [registry],
    }),
    hubUnreadFull: new Counter({
      name: 'voxgate_mcp_unread_budget_full_total',
      help: "Writes to hosted MCP servers and tool processes that did not fit in mcp.unreadBudgetBytes, by outcome: refused (the writer's tenant or server held the most: the message not sent, the call it carried failed), cut (a peer of the tenant or server holding the most was cut to make room for another's write: a WebSocket closed, a stdio server restarted)",
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    hubToolListsCut: new Counter({
      name: 'voxgate_mcp_server_tool_lists_cut_total',
      help: "Hosted MCP servers' tool lists cut by a bound: tools (mcp.maxToolsPerServer), bytes (mcp.maxToolBytesPerServer), pages (64)",
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    hubChangesHeld: new Counter({
      name: 'voxgate_mcp_server_changes_held_total',
      help: "Hosted MCP servers' announcements of change (tools, prompts, resources, state) merged into a later one: each server's are passed on to /mcp sessions at most once a second",
      registers: [registry],
    }),
    hubLogsDropped: new Counter({
      name: 'voxgate_mcp_server_logs_dropped_total',
      help: 'Log messages from hosted MCP servers over mcp.upstreamLogRatePerSecond, dropped',
      registers: [registry],
    }),
    hubCalls: new Counter({
      name: 'voxgate_tool_calls_total',
      help: 'Namespaced tool calls (HTTP and MCP endpoint), by target kind and outcome',
      labelNames: ['kind', 'outcome'] as const,
      registers: [registry],
    }),
    mcpRequests: new Counter({
      name: 'voxgate_mcp_endpoint_requests_total',
      help: 'Requests to the /mcp endpoint, by outcome',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    ...inboundEndpointMetrics(registry),
    mcpSessions: new Gauge({ name: 'voxgate_mcp_endpoint_sessions', help: 'Open initialize-era sessions on the /mcp endpoint', registers: [registry] }),
    mcpSessionsEvicted: new Counter({
      name: 'voxgate_mcp_endpoint_sessions_evicted_total',
      help: '/mcp sessions closed to admit a new one of the same API key (its least recently used without an open stream), by reason (key_limit: the key held mcp.endpoint.maxSessionsPerKey; tenant_limit: its tenant held maxSessionsPerTenant; gateway_limit: the gateway held maxSessions)',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    mcpEndpointUnreadBytes: new Gauge({
      name: 'voxgate_mcp_endpoint_unread_bytes',
      help: "Bytes the gateway wrote on /mcp responses (sessions' SSE streams and JSON answers, stateless streams) that their clients' sockets have not taken yet, all together, against mcp.endpoint.unreadBudgetBytes",
      registers: [registry],
    }),
    mcpEndpointUnreadPeak: new Gauge({
      name: 'voxgate_mcp_endpoint_unread_bytes_peak',
      help: 'The most voxgate_mcp_endpoint_unread_bytes has been since the gateway started (never past mcp.endpoint.unreadBudgetBytes)',
      registers: [registry],
    }),
    mcpEndpointUnreadFull: new Counter({
      name: 'voxgate_mcp_endpoint_unread_budget_full_total',
      help: "Writes on /mcp responses that did not fit in mcp.endpoint.unreadBudgetBytes, by outcome: refused (the writer's tenant, or key without one, held the most: its response cut, an SSE stream to be resumed with Last-Event-ID), cut (a response of the tenant or key holding the most was cut to make room for another's write)",
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    mcpStreamsCut: new Counter({
      name: 'voxgate_mcp_endpoint_streams_cut_total',
      help: '/mcp streams cut because their client left more than 1 MiB unread, by kind (session: a GET stream or POST answer; stateless: a subscriptions/listen stream or SSE answer)',
      labelNames: ['stream'] as const,
      registers: [registry],
    }),
    eventsDropped: new Counter({
      name: 'voxgate_events_dropped_total',
      help: 'Device events dropped before the bus, by reason (device_rate: over the per-device rate)',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    // The persisted event history (embedded store): events written in batches, or dropped (writes kept failing).
    eventHistory: new Counter({
      name: 'voxgate_event_history_writes_total',
      help: 'Events written to the event history, or dropped (outcome: written, dropped)',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    eventHistorySize: new Gauge({ name: 'voxgate_event_history_size', help: 'Events kept in the event history (embedded store)', registers: [registry] }),
    eventHistoryBytes: new Gauge({
      name: 'voxgate_event_history_bytes',
      help: "Bytes of the data of the events kept in the event history, each event's JSON text as stored (embedded store; events.history.maxBytes)",
      registers: [registry],
    }),
    eventHistoryEvicted: new Counter({
      name: 'voxgate_event_history_evicted_total',
      help: 'Events dropped from the event history by retention, by the bound that dropped them (reason: age, events, events_per_tenant, bytes, bytes_per_tenant; embedded store)',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    sseDropped: new Counter({
      name: 'voxgate_sse_streams_dropped_total',
      help: 'SSE streams closed or refused by the gateway, by reason (slow: a /v1/events reader past events.maxBufferedBytes unread; slow_turn: a streamed assistant turn or chat completion whose caller left that much unread, the turn cancelled; write_timeout: either, whose socket took none of what waited for events.writeTimeoutMs, also after a turn ended; total_cap, key_cap, tenant_cap: a new /v1/events stream refused at the total cap, a key cap or a tenant cap)',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    devicesKnown: new Gauge({
      name: 'voxgate_devices_known',
      help: 'Devices known here, online or not (recorded in the store; bounded by devices.maxKnown but for online and named ones)',
      registers: [registry],
    }),
    deviceRecordWrites: new Counter({
      name: 'voxgate_device_record_writes_total',
      help: 'Device record store operations (a batch of facts: connects, last seen, disconnects; a metadata write; a forget), by outcome',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    devicesForgotten: new Counter({
      name: 'voxgate_devices_forgotten_total',
      help: 'Offline devices forgotten past devices.maxKnown (never_ready first, then offline least recently seen)',
      labelNames: ['kind'] as const,
      registers: [registry],
    }),
    queuedCallBytesBound: new Counter({
      name: 'voxgate_queued_call_bytes_bound_total',
      help: 'Queued calls refused past fleet.maxQueuedBytes (queued_total) or maxQueuedBytesPerTenant (queued_tenant), and finished ones forgotten past keepFinishedBytes (finished)',
      labelNames: ['bound'] as const,
      registers: [registry],
    }),
    deviceTenantsDropped: new Counter({
      name: 'voxgate_device_tenants_dropped_total',
      help: 'Tenants enrollment.tenantRules gave device ids not recorded yet (OTA checks, no connection), dropped past the bound of 10 000 held in memory',
      registers: [registry],
    }),
    connectionsOpen: new Gauge({
      name: 'voxgate_connections_open',
      help: 'Open sockets per listener (devices, API callers, idle ones)',
      labelNames: ['listener'] as const,
      registers: [registry],
    }),
    connectionsRefused: new Counter({
      name: 'voxgate_connections_refused_total',
      help: 'Connections refused or closed by a connection limit: listener_full, address_full, device_cap, no_connect, no_request, unread, keepalive (an MQTT device silent past 1.5x its keepalive, a WebSocket device that answered no ping for a heartbeat round)',
      labelNames: ['listener', 'reason'] as const,
      registers: [registry],
    }),
    enrollments: new Counter({
      name: 'voxgate_enrollment_decisions_total',
      help: 'OTA and activation decisions, by outcome',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    rateLimited: new Counter({
      name: 'voxgate_rate_limited_total',
      help: 'Requests refused by a per-address rate limit, by route',
      labelNames: ['route'] as const,
      registers: [registry],
    }),
    takeoversRefused: new Counter({
      name: 'voxgate_device_takeovers_refused_total',
      help: 'New connections refused because a live one holds other credentials',
      registers: [registry],
    }),
    handlerErrors: new Counter({
      name: 'voxgate_frame_handler_errors_total',
      help: 'Unexpected errors in a connection frame handler (the connection is closed, the gateway goes on)',
      labelNames: ['transport'] as const,
      registers: [registry],
    }),
    schemasRefused: new Counter({
      name: 'voxgate_schemas_refused_total',
      help: 'Tool schemas over the size, depth or complexity bounds (tool left out)',
      labelNames: ['source', 'reason'] as const,
      registers: [registry],
    }),
    patternsUnenforced: new Counter({
      name: 'voxgate_schema_patterns_unenforced_total',
      help: 'Schema patterns the linear-time regex engine cannot run (not enforced)',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    deviceContent: new Counter({
      name: 'voxgate_device_content_normalized_total',
      help: 'Device tools/call content items rewritten to valid MCP content (firmware_image: the firmware image shape; malformed: passed on as text)',
      labelNames: ['kind'] as const,
      registers: [registry],
    }),
    unhandledErrors: new Counter({
      name: 'voxgate_unhandled_errors_total',
      help: 'Errors no handler caught, by kind (rejection: logged, the gateway goes on; exception: logged, the gateway stops and exits 1)',
      labelNames: ['kind'] as const,
      registers: [registry],
    }),
    schemaValidators: new Gauge({
      name: 'voxgate_schema_validators_cached',
      help: 'Compiled schema validators held (LRU, shared by schema content)',
      registers: [registry],
    }),
    tlsReloads: new Counter({
      name: 'voxgate_tls_reloads_total',
      help: 'TLS certificate reloads (SIGUSR2), by outcome (ok, failed: the previous certificate stays)',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    tlsCertificateExpiry: new Gauge({
      name: 'voxgate_tls_certificate_expiry_timestamp_seconds',
      help: 'When the served TLS certificate expires (Unix time)',
      registers: [registry],
    }),
    tlsHandshakeFailures: new Counter({
      name: 'voxgate_tls_handshake_failures_total',
      help: 'TLS connections closed in the handshake, by listener and reason (timeout, error, plain_http: an http:// request to the HTTPS port)',
      labelNames: ['listener', 'reason'] as const,
      registers: [registry],
    }),
  };
  return { ...m, hot: { ...hotCounters(m.calls, m.framesIn, m.callDuration), ...fleetCounters(m) } };
}

/**
 * The counters every call or frame increments, bound once (bindCounter: an increment is one addition, not a
 * label hash): what a device sent, the outcome of a call that succeeded, and every call's duration (bindHistogram).
 */
function hotCounters(calls: Counter<'outcome'>, framesIn: Counter<'transport' | 'kind'>, callDuration: Histogram) {
  const framesOf = (transport: 'websocket' | 'mqtt') => ({
    mcp: bindCounter(framesIn, { transport, kind: 'mcp' }),
    other: bindCounter(framesIn, { transport, kind: 'other' }),
    audio: bindCounter(framesIn, { transport, kind: 'audio' }),
  });
  return {
    callsOk: bindCounter(calls, { outcome: 'ok' }),
    callDuration: bindHistogram(callDuration),
    framesIn: { websocket: framesOf('websocket'), mqtt: framesOf('mqtt') },
  };
}

/**
 * What every device's connect, setup and disconnect moves, bound once (bindCounter, bindGauge): a fleet dialling in
 * moved each through prom-client's label hash (~1.5 % of the ready path's CPU, docs/performance.md `fleetready2`).
 * Every writer of these series goes through them.
 */
function fleetCounters(m: {
  connections: Counter<'transport'>;
  devicesConnected: Gauge<'transport'>;
  devicesReady: Gauge;
  devicesKnown: Gauge;
  toolsPages: Counter<'source'>;
}) {
  const byTransport = <T>(bind: (transport: 'websocket' | 'mqtt') => T) => ({ websocket: bind('websocket'), mqtt: bind('mqtt') });
  return {
    connections: byTransport((transport) => bindCounter(m.connections, { transport })),
    devicesConnected: byTransport((transport) => bindGauge(m.devicesConnected, { transport })),
    devicesReady: bindGauge(m.devicesReady, {}),
    devicesKnown: bindGauge(m.devicesKnown, {}),
    toolsPages: { cache: bindCounter(m.toolsPages, { source: 'cache' }), parsed: bindCounter(m.toolsPages, { source: 'parsed' }) },
  };
}

/** The inbound MCP endpoint's own series (tool processes such as mcp_pipe.py that dial in). */
function inboundEndpointMetrics(registry: Registry) {
  return {
    inboundEndpointConnections: new Gauge({
      name: 'voxgate_mcp_inbound_endpoint_connections',
      help: 'Tool processes connected to the inbound MCP endpoint (mcp_pipe.py and the like)',
      registers: [registry],
    }),
    inboundEndpointRefused: new Counter({
      name: 'voxgate_mcp_inbound_endpoint_refused_total',
      help: 'Connections to the inbound MCP endpoint refused at the upgrade, by reason (unknown_token, rate_limited, token_rate, total_full, token_full)',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    inboundEndpointCalls: new Counter({
      name: 'voxgate_mcp_inbound_endpoint_tool_calls_total',
      help: 'Tool calls served by tool processes on the inbound MCP endpoint, by outcome (ok, tool_error: an error result, a timeout or a dropped connection)',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** The `listener` label of the connection and TLS metrics. */
export type Listener = 'http' | 'mqtt';
