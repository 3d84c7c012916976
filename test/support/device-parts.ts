/**
 * The parts a device session is built from, for tests that build one part directly (no gateway, no
 * sockets): settings, metrics, a bus that records its events, and a session over an in-memory link.
 */
import pino from 'pino';
import { DeviceRegistry } from '../../gateway/src/devices/registry.js';
import { badInputBudget, BadInputLog } from '../../gateway/src/devices/bad-input-log.js';
import { CatalogBudget } from '../../gateway/src/devices/catalog-budget.js';
import { NoVoiceHook } from '../../gateway/src/devices/no-voice-hook.js';
import { SourceReadBudgets } from '../../gateway/src/devices/source-read-budgets.js';
import { RpcChannel } from '../../gateway/src/devices/rpc-channel.js';
import { DeviceSession } from '../../gateway/src/devices/session.js';
import { HELLO_RATE, type SessionShared } from '../../gateway/src/devices/session-shared.js';
import { KeyedTokenBucket } from '../../gateway/src/throttle/token-bucket.js';
import type { SessionSettings } from '../../gateway/src/devices/settings.js';
import { ToolsPageCache } from '../../gateway/src/devices/tools-page-cache.js';
import { EventBus, type GatewayEvent } from '../../gateway/src/events/bus.js';
import { createMetrics, type Metrics } from '../../gateway/src/metrics.js';
import { SchemaValidators } from '../../gateway/src/schemas/validators.js';
import { createLinkedPair, type InMemoryDevice, type InMemoryLink } from './in-memory-link.js';
import { until } from './wait.js';

export const silentLog = pino({ level: 'silent' });

export function testSettings(overrides: Partial<SessionSettings> = {}): SessionSettings {
  return {
    requestTimeoutMs: 2000,
    maxToolPages: 16,
    maxTools: 256,
    maxCatalogBytes: 256 * 1024,
    catalogs: new CatalogBudget(Number.MAX_SAFE_INTEGER),
    calls: { defaultTimeoutMs: 2000, maxTimeoutMs: 10_000 },
    queueLimit: 8,
    concurrency: 1,
    clientInfo: { name: 'voxgate-test', version: '0.0.0' },
    frameLimits: { maxDepth: 64, maxBytes: 256 * 1024 },
    unsolicitedFrames: { ratePerSecond: 100, burst: 200 },
    sourceFrames: new SourceReadBudgets({ ratePerSecond: 2000, burst: 4000 }),
    schemaLimits: { maxDepth: 32, maxBytes: 64 * 1024 },
    setupRetryMinMs: 5,
    setupRetryMaxMs: 20,
    setupMaxErrors: 3,
    ...overrides,
  };
}

/** A metric's current value (a counter or gauge with these labels), 0 when never set. */
export async function metricValue(metrics: Metrics, name: string, labels: Record<string, string> = {}): Promise<number> {
  const m = (await metrics.registry.getMetricsAsJSON()).find((x) => x.name === name);
  const v = m?.values.find((x) => Object.entries(labels).every(([k, want]) => String((x.labels as Record<string, unknown>)[k]) === want));
  return v?.value ?? 0;
}

/** A bus whose events are kept in order. */
export function recordingBus(): { bus: EventBus; events: GatewayEvent[] } {
  const bus = new EventBus({ bufferSize: 100 });
  const events: GatewayEvent[] = [];
  bus.subscribe((e) => events.push(e));
  return { bus, events };
}

/** A channel over an in-memory link, and the device end to answer its requests. */
export function channelPair(transport: 'websocket' | 'mqtt' = 'websocket', deviceId = '02:00:00:00:00:01') {
  const [link, device] = createLinkedPair(transport);
  const metrics = createMetrics();
  let closed = false;
  const channel = new RpcChannel({
    deviceId,
    sessionId: 's-1',
    send: (t) => link.send(t),
    isClosed: () => closed,
    log: silentLog,
    metrics,
    badInput: new BadInputLog(silentLog),
  });
  link.receiver = { onText: (t) => void channel.takeRaw(t) };
  return { channel, link, device, metrics, close: () => (closed = true) };
}

export interface SessionUnderTest {
  session: DeviceSession;
  link: InMemoryLink;
  device: InMemoryDevice;
  metrics: Metrics;
  events: GatewayEvent[];
  bus: EventBus;
}

/** A session over an in-memory link, its frames delivered to it as a link would. */
export interface SessionPairOptions {
  transport?: 'websocket' | 'mqtt';
  settings?: Partial<SessionSettings>;
  deps?: Partial<SessionShared>;
}

export function sessionPair(opts: SessionPairOptions = {}): SessionUnderTest {
  const transport = opts.transport ?? 'websocket';
  const [link, device] = createLinkedPair(transport);
  const metrics = createMetrics();
  const { bus, events } = recordingBus();
  const settings = testSettings(opts.settings);
  const session = new DeviceSession(
    {
      log: silentLog,
      bus,
      metrics,
      settings,
      pages: new ToolsPageCache(),
      validators: new SchemaValidators({ limits: settings.schemaLimits, maxCached: 64 }),
      host: { vision: () => undefined, previousHash: () => undefined, onReady: () => undefined, onClosed: () => undefined },
      voice: new NoVoiceHook(silentLog),
      hellos: new KeyedTokenBucket(HELLO_RATE, { maxKeys: 16 }),
      badInputLines: badInputBudget(silentLog),
      ...opts.deps,
    },
    { deviceId: '02:00:00:00:00:01', clientId: 'client-1', link },
    transport === 'websocket',
  );
  link.receiver = { onText: (t) => session.onText(t), onBinary: (b) => session.onBinary(b), onClosed: (r) => session.onClosed(r) };
  return { session, link, device, metrics, events, bus };
}

/** Answer initialize and a one-page tools/list with `tools`, as a device would. */
export async function answerSetup(device: InMemoryDevice, tools: Array<Record<string, unknown>>): Promise<void> {
  const init = await device.nextRequest('initialize');
  device.reply(init.id, { protocolVersion: '2024-11-05', capabilities: { tools: {} }, serverInfo: { name: 'sim-board', version: '1.0.0' } });
  const list = await device.nextRequest('tools/list');
  device.reply(list.id, { tools });
}

export const HELLO = JSON.stringify({ type: 'hello', version: 1, transport: 'websocket', features: { mcp: true } });

/** A registry built from its parts, and a way to connect in-memory devices to it as the links do. */
export function registryPart(
  opts: { settings?: Partial<SessionSettings>; maxKnownDevices?: number; pages?: ToolsPageCache } = {},
  defaultTools: Array<Record<string, unknown>> = [],
) {
  const lines: Array<Record<string, unknown>> = [];
  const log = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) });
  const metrics = createMetrics();
  const { bus, events } = recordingBus();
  const settings = testSettings(opts.settings);
  const registry = new DeviceRegistry({
    log,
    bus,
    metrics,
    settings,
    vision: () => undefined,
    pages: opts.pages ?? new ToolsPageCache(),
    validators: new SchemaValidators({ limits: settings.schemaLimits, maxCached: 64 }),
    ...(opts.maxKnownDevices !== undefined ? { maxKnownDevices: opts.maxKnownDevices } : {}),
  });
  const connect = (deviceId: string, o: { transport?: 'websocket' | 'mqtt'; credential?: string } = {}) => {
    const transport = o.transport ?? 'websocket';
    const [link, device] = createLinkedPair(transport);
    const session = registry.connect({
      deviceId,
      clientId: `client-${deviceId}`,
      link,
      expectHello: transport === 'websocket',
      credential: o.credential ?? '',
    });
    if (session) link.receiver = { onText: (t) => session.onText(t), onBinary: (b) => session.onBinary(b), onClosed: (r) => session.onClosed(r) };
    return { link, device, session };
  };
  /** Connected over WebSocket, hello said, set up with `tools`, ready. */
  const ready = async (deviceId: string, tools = defaultTools, credential = '') => {
    const c = connect(deviceId, { credential });
    c.device.send(HELLO);
    await answerSetup(c.device, tools);
    await until(() => registry.get(deviceId)?.state === 'ready', `${deviceId} to be ready`);
    return c;
  };
  return { registry, metrics, events, lines, connect, ready };
}
