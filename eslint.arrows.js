/**
 * The allowed arrows between the gateway's folders (gateway/src/<folder>/), the design's one-way imports.
 * eslint.config.js turns this table into a `no-restricted-imports` rule per folder, and docs/architecture.md
 * shows the same table: change both together.
 *
 * Every folder may also import the root leaves (errors, metrics, log, version, secrets, config-errors, the
 * `Config` type of config.ts), the leaf folders listed in LEAVES, and any folder's `config.ts` (its schema slice). Nothing imports the composition root
 * (gateway.ts, main.ts, index.ts). `only` narrows an arrow to named leaf modules of the target folder.
 */
export const LEAVES = ['schemas', 'throttle', 'nats', 'config'];

/** @type {Record<string, Array<string | { folder: string, only: string[] }>>} */
export const ARROWS = {
  // Leaves: no arrow to any other folder.
  config: [],
  schemas: [],
  throttle: [],
  nats: [],
  tls: [],
  store: [],
  // The core: links know bytes, devices know a device's MCP, hub knows the namespace.
  events: [],
  devices: ['events'],
  enrollment: ['store'],
  // The MCP endpoint's WebSocket (tool processes dial in) hands its socket to the hub's transport.
  links: ['devices', 'enrollment', 'events', 'tls', { folder: 'hub', only: ['endpoints'] }],
  // Endpoint tokens are kept (hashed) in the store.
  hub: ['devices', 'events', 'store'],
  cluster: ['devices', 'events'],
  // The consumers of the core.
  vision: ['events', { folder: 'api', only: ['schemas', 'route-helpers'] }],
  firmware: [{ folder: 'api', only: ['schemas', 'route-helpers'] }],
  facade: ['hub', { folder: 'api', only: ['auth'] }],
  assistant: ['hub', { folder: 'vision', only: ['image-type', 'bmp-to-png'] }],
  // voice.mode converse answers with the assistant's turn and keeps per-device modes in the store.
  voice: ['devices', 'hub', 'events', 'store', 'assistant'],
  // Fleet operations (schedules, queued calls, jobs) kept in the store, reaching devices through the hub.
  fleet: ['devices', 'hub', 'events', 'store'],
  // The HTTP edge mounts the route plugins of the consumers, and caps and secures its own sockets (links, tls).
  api: ['devices', 'events', 'enrollment', 'hub', 'assistant', 'facade', 'firmware', 'vision', 'voice', 'links', 'tls', 'fleet'],
  // The CLI talks to a gateway over HTTP; it reads only the configuration's defaults.
  cli: [],
};

/** Every folder of gateway/src that the table knows. */
export const FOLDERS = Object.keys(ARROWS);
