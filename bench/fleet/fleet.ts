/**
 * A lightweight fleet of simulated devices in one process, driven by the bench runner over IPC.
 *
 * On the wire each device behaves like the reference xiaozhi-esp32 firmware (see
 * test/support/reference-device.ts, which is faithful but far too heavy for 10 000 devices):
 * - WebSocket: `Device-Id`, `Client-Id`, `Protocol-Version: 1` headers, a client `hello` right after the
 *   upgrade; the session id of the server hello goes into every envelope.
 * - MQTT: client id `GID_<group>@@@<mac_>@@@<uuid>`, never subscribes, publishes to `device-server`.
 * - MCP replies are concatenated strings `{"session_id":..,"type":"mcp","payload":..}`; requests with a
 *   non-numeric id are dropped; notifications are ignored; errors carry no `code`; `tools/list` pages are
 *   the firmware's (8000-byte budget, the cursor is a tool name), pre-rendered once for the whole fleet.
 * - Tool calls are answered at once (`true`), unknown tools get the firmware's error.
 *
 * Per device: one socket and one small object. Nothing per device is kept beyond that.
 * `bare` mode opens plain WebSocket connections that only say hello (the fleet floor).
 */
import { randomUUID } from 'node:crypto';
import { connect as mqttConnect, type MqttClient } from 'mqtt';
import { WebSocket, type RawData } from 'ws';
import { HELLO, INIT_RESULT, benchCatalog } from './catalog.js';

const catalog = benchCatalog();
const LAST_PAGE_CURSORS = new Set([...catalog.pages.entries()].filter(([, body]) => !body.includes('"nextCursor"')).map(([c]) => c));
const CALL_RESULT = '{"content":[{"type":"text","text":"true"}],"isError":false}';
const CONNECT_ATTEMPTS = 8;

export type FleetCommand =
  | {
      id: number;
      cmd: 'connect';
      group: string;
      /** `device` answers MCP; `bare` only says hello. */
      mode: 'device' | 'bare';
      /** Done when every device is `ready` (answered its last tools/list page) or merely `open`. */
      waitFor: 'ready' | 'open';
      transport: 'ws' | 'mqtt';
      /** ws://host:port/path or mqtt://host:port */
      url: string;
      count: number;
      /** Second byte of every MAC in the group, so groups never share a device id. */
      macGroup: number;
      /** Index of the first device (MACs of this process's slice). */
      first: number;
      sources: string[];
      inflight: number;
      timeoutMs: number;
    }
  | { id: number; cmd: 'storm'; group: string; timeoutMs: number }
  | { id: number; cmd: 'close'; group: string }
  | { id: number; cmd: 'stats' }
  /** A full collection now (the process runs with --expose-gc): a measured window starts with no earlier group's garbage. */
  | { id: number; cmd: 'gc' };

export interface GroupStats {
  devices: number;
  open: number;
  ready: number;
  calls: number;
  connectRetries: number;
  connectFailures: number;
  droppedFrames: number;
  unknownTools: number;
}

interface Group {
  name: string;
  cmd: Extract<FleetCommand, { cmd: 'connect' }>;
  devices: Device[];
  stats: GroupStats;
  /** Resolves when `ready` or `open` (cmd.waitFor) reaches the group size. */
  waiter?: () => void;
}

function macOf(group: number, index: number): string {
  const b = [0x02, group & 0xff, (index >>> 24) & 0xff, (index >>> 16) & 0xff, (index >>> 8) & 0xff, index & 0xff];
  return b.map((x) => x.toString(16).padStart(2, '0')).join(':');
}

class Device {
  sid = '';
  ws: WebSocket | undefined;
  mqtt: MqttClient | undefined;
  isReady = false;
  isOpen = false;
  constructor(
    readonly g: Group,
    readonly mac: string,
    readonly source: string | undefined,
  ) {}

  /** Open the link; resolves when open (or after the last failed attempt). */
  open(): Promise<void> {
    return this.g.cmd.transport === 'ws' ? this.openWs(1) : this.openMqtt(1);
  }

  private openWs(attempt: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const opts: ConstructorParameters<typeof WebSocket>[2] = {
        headers: { 'Device-Id': this.mac, 'Client-Id': this.mac, 'Protocol-Version': '1' },
        perMessageDeflate: false,
        handshakeTimeout: 15_000,
      };
      if (this.source) opts.localAddress = this.source;
      const ws = new WebSocket(this.g.cmd.url, opts);
      this.ws = ws;
      let opened = false;
      ws.on('open', () => {
        opened = true;
        this.onOpen();
        ws.send(HELLO);
        resolve();
      });
      ws.on('message', (data: RawData, isBinary: boolean) => {
        if (!isBinary && this.g.cmd.mode === 'device') this.onText(String(data));
      });
      ws.on('error', () => {});
      ws.on('close', () => {
        if (this.ws !== ws) return;
        this.onClose();
        if (!opened) {
          if (attempt < CONNECT_ATTEMPTS) {
            this.g.stats.connectRetries++;
            setTimeout(() => void this.openWs(attempt + 1).then(resolve), 100 * attempt);
          } else {
            this.g.stats.connectFailures++;
            resolve();
          }
        }
      });
    });
  }

  private openMqtt(attempt: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const clientId = `GID_voxgate@@@${this.mac.replace(/:/g, '_')}@@@${randomUUID()}`;
      const client = mqttConnect(this.g.cmd.url, { clientId, protocolVersion: 4, clean: true, keepalive: 240, reconnectPeriod: 0, connectTimeout: 15_000 });
      this.mqtt = client;
      let opened = false;
      client.on('connect', () => {
        opened = true;
        this.onOpen();
        resolve();
      });
      // The reference device subscribes to nothing: the gateway pushes to it.
      client.on('message', (_topic: string, payload: Buffer) => this.onText(payload.toString('utf8')));
      client.on('error', () => {});
      client.on('close', () => {
        if (this.mqtt !== client) return;
        this.onClose();
        if (!opened) {
          client.end(true);
          if (attempt < CONNECT_ATTEMPTS) {
            this.g.stats.connectRetries++;
            setTimeout(() => void this.openMqtt(attempt + 1).then(resolve), 100 * attempt);
          } else {
            this.g.stats.connectFailures++;
            resolve();
          }
        }
      });
    });
  }

  private onOpen(): void {
    this.isOpen = true;
    this.g.stats.open++;
    if (this.g.cmd.waitFor === 'open') progress(this.g);
  }

  private onClose(): void {
    if (this.isOpen) this.g.stats.open--;
    this.isOpen = false;
    if (this.isReady) this.g.stats.ready--;
    this.isReady = false;
    this.sid = '';
  }

  drop(): void {
    if (this.ws) {
      const ws = this.ws;
      this.ws = undefined;
      if (this.isOpen) this.onClose();
      ws.terminate();
    }
    if (this.mqtt) {
      const c = this.mqtt;
      this.mqtt = undefined;
      if (this.isOpen) this.onClose();
      c.end(true);
    }
  }

  private send(text: string): void {
    if (this.ws) this.ws.send(text);
    else this.mqtt?.publish('device-server', text, { qos: 0 });
  }

  private reply(id: number, result: string): void {
    this.send(`{"session_id":"${this.sid}","type":"mcp","payload":{"jsonrpc":"2.0","id":${id},"result":${result}}}`);
  }

  private replyError(id: number, message: string): void {
    this.send(`{"session_id":"${this.sid}","type":"mcp","payload":{"jsonrpc":"2.0","id":${id},"error":{"message":"${message}"}}}`);
  }

  private onText(text: string): void {
    let frame: { type?: unknown; session_id?: unknown; payload?: { jsonrpc?: unknown; id?: unknown; method?: unknown; params?: Record<string, unknown> } };
    try {
      frame = JSON.parse(text) as typeof frame;
    } catch {
      this.g.stats.droppedFrames++;
      return;
    }
    if (frame.type === 'hello') {
      if (typeof frame.session_id === 'string') this.sid = frame.session_id;
      return;
    }
    if (frame.type !== 'mcp' || typeof frame.payload !== 'object' || frame.payload === null) return;
    const p = frame.payload;
    if (p.jsonrpc !== '2.0' || typeof p.method !== 'string') return;
    if (p.method.startsWith('notifications')) return;
    if (typeof p.id !== 'number') {
      this.g.stats.droppedFrames++; // the firmware drops string ids ("Invalid id for method")
      return;
    }
    const id = Math.trunc(p.id);
    const params = p.params ?? {};
    switch (p.method) {
      case 'initialize':
        return this.reply(id, INIT_RESULT);
      case 'tools/list': {
        const cursor = typeof params['cursor'] === 'string' ? params['cursor'] : '';
        const page = catalog.pages.get(cursor);
        if (!page) return this.replyError(id, 'Failed to add tool  because of payload size limit');
        this.reply(id, page);
        if (LAST_PAGE_CURSORS.has(cursor) && !this.isReady) {
          this.isReady = true;
          this.g.stats.ready++;
          progress(this.g);
        }
        return;
      }
      case 'tools/call': {
        const name = params['name'];
        if (typeof name !== 'string') return this.replyError(id, 'Missing name');
        if (!catalog.toolNames.has(name)) {
          this.g.stats.unknownTools++;
          return this.replyError(id, `Unknown tool: ${name}`);
        }
        this.g.stats.calls++;
        return this.reply(id, CALL_RESULT);
      }
      default:
        return this.replyError(id, `Method not implemented: ${p.method}`);
    }
  }
}

const groups = new Map<string, Group>();

function progress(g: Group): void {
  const done = g.cmd.waitFor === 'open' ? g.stats.open : g.stats.ready;
  if (g.waiter && done >= g.devices.length) {
    const w = g.waiter;
    g.waiter = undefined;
    w();
  }
}

/** Open every device with at most `inflight` handshakes at once (the listen backlog is finite). */
async function openAll(g: Group): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < g.devices.length) await g.devices[next++]!.open();
  };
  await Promise.all(Array.from({ length: Math.min(g.cmd.inflight, g.devices.length) }, worker));
}

function whenDone(g: Group, timeoutMs: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => {
      g.waiter = undefined;
      resolve(false);
    }, timeoutMs);
    g.waiter = () => {
      clearTimeout(timer);
      resolve(true);
    };
    progress(g);
  });
}

async function handle(m: FleetCommand): Promise<Record<string, unknown>> {
  switch (m.cmd) {
    case 'connect': {
      if (groups.has(m.group)) throw new Error(`group ${m.group} exists`);
      const g: Group = {
        name: m.group,
        cmd: m,
        devices: [],
        stats: { devices: m.count, open: 0, ready: 0, calls: 0, connectRetries: 0, connectFailures: 0, droppedFrames: 0, unknownTools: 0 },
      };
      for (let i = 0; i < m.count; i++) {
        const source = m.sources.length > 0 ? m.sources[i % m.sources.length] : undefined;
        g.devices.push(new Device(g, macOf(m.macGroup, m.first + i), source));
      }
      groups.set(m.group, g);
      const t0 = performance.now();
      const done = whenDone(g, m.timeoutMs);
      await openAll(g);
      const ok = await done;
      return { ok, ms: performance.now() - t0, stats: g.stats };
    }
    case 'storm': {
      const g = groups.get(m.group);
      if (!g) throw new Error(`no group ${m.group}`);
      const t0 = performance.now();
      for (const d of g.devices) d.drop();
      const done = whenDone(g, m.timeoutMs);
      await openAll(g);
      const ok = await done;
      return { ok, ms: performance.now() - t0, stats: g.stats };
    }
    case 'close': {
      const g = groups.get(m.group);
      if (!g) return { ok: true };
      for (const d of g.devices) d.drop();
      groups.delete(m.group);
      return { ok: true, stats: g.stats };
    }
    case 'gc': {
      const gc = (globalThis as { gc?: () => void }).gc;
      gc?.();
      return { ok: gc !== undefined };
    }
    case 'stats':
      return { ok: true, groups: Object.fromEntries([...groups].map(([k, g]) => [k, g.stats])), mem: process.memoryUsage() };
  }
}

process.on('message', (m: FleetCommand) => {
  handle(m).then(
    (r) => process.send?.({ id: m.id, ...r }),
    (e: unknown) => process.send?.({ id: m.id, ok: false, error: e instanceof Error ? e.message : String(e) }),
  );
});
process.on('disconnect', () => process.exit(0));
process.send?.({ id: 0, ok: true, ready: true, pages: catalog.pageCount, tools: catalog.toolNames.size });
// Exit normally on SIGTERM so that --cpu-prof writes its profile.
process.on('SIGTERM', () => process.exit(0));
