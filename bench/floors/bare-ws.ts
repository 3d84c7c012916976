/**
 * Floors for the fleet, on one plain `ws` server (no session, no validation, no heartbeat):
 * - any path but /xiaozhi/…: connections that are accepted and kept, nothing more. What N sockets cost.
 * - /xiaozhi/v1/: the four round trips a device needs to be ready, and nothing else — the client hello
 *   answered, `initialize`, then `tools/list` page after page (following `nextCursor`), each reply read with
 *   `JSON.parse` only. A device is ready when its last page is in: what the gateway's ready/s is compared with.
 * - /xiaozhi/writes/: the same, plus the rows the gateway persists for each device (fleet-writes.ts): its record and
 *   its `device.online`, `device.ready` and `device.offline` history rows. The SQLite file is opened by a
 *   `{cmd:'writes'}` request before that round, so the rounds before it never include it.
 */
import { createServer } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import { serveMemoryProbe } from '../procs/ipc.js';
import type { FleetWrites, Ready } from './fleet-writes.js';

const server = createServer((_req, res) => res.writeHead(404).end());
const wss = new WebSocketServer({ server, perMessageDeflate: false });
let readyCount = 0;
let sessions = 0;
let writes: FleetWrites | undefined;
/** Devices whose record is written: a known device's reconnect writes only history rows, as the gateway's does. */
const recorded = new Set<string>();

function handshake(ws: WebSocket, w: { to: FleetWrites; device: string; clientId: string } | undefined): void {
  const sid = `floor-${++sessions}`;
  let isReady = false;
  // What device.ready says: the initialize result's server and version, and the tools the pages held.
  let ready: Ready | undefined;
  const request = (id: number, method: string, params: Record<string, unknown>) =>
    ws.send(`{"session_id":"${sid}","type":"mcp","payload":${JSON.stringify({ jsonrpc: '2.0', id, method, params })}}`);
  ws.on('message', (data, isBinary) => {
    if (isBinary) return;
    const m = JSON.parse(String(data)) as {
      type?: string;
      payload?: { id?: number; result?: { nextCursor?: string; tools?: unknown[]; serverInfo?: Ready['server']; protocolVersion?: string } };
    };
    if (m.type === 'hello') {
      w?.to.event('device.online', w.device, { transport: 'websocket', clientId: w.clientId });
      ws.send(`{"type":"hello","transport":"websocket","session_id":"${sid}"}`);
      return request(1, 'initialize', { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'floor', version: '1' } });
    }
    const id = m.payload?.id;
    if (typeof id !== 'number') return;
    const result = m.payload?.result;
    const cursor = result?.nextCursor;
    if (w && result) {
      if (id === 1)
        ready = {
          toolCount: 0,
          hash: sid.padEnd(22, '-'),
          server: result.serverInfo ?? { name: '', version: '' },
          protocolVersion: result.protocolVersion ?? '',
        };
      else if (ready) ready.toolCount += result.tools?.length ?? 0;
    }
    if (id === 1 || cursor) return request(id + 1, 'tools/list', cursor ? { cursor } : {});
    if (!isReady) {
      isReady = true;
      readyCount++;
      if (w && ready) {
        w.to.event('device.ready', w.device, { ...ready });
        if (!recorded.has(w.device)) w.to.record(w.device, w.clientId, ready);
        recorded.add(w.device);
      }
    }
  });
  ws.on('close', () => {
    if (!isReady) return;
    readyCount--;
    w?.to.event('device.offline', w.device, { reason: 'closed' });
  });
}

wss.on('connection', (ws, req) => {
  ws.on('error', () => {});
  if (!req.url?.startsWith('/xiaozhi/')) return;
  if (!req.url.startsWith('/xiaozhi/writes/')) return handshake(ws, undefined);
  if (!writes) return void ws.close(1011, 'writes not opened');
  handshake(ws, { to: writes, device: String(req.headers['device-id']), clientId: String(req.headers['client-id']) });
});

// `{cmd:'writes'}` opens the SQLite file before the writing floor's window, as the gateway's store is open before its.
process.on('message', (m: { id: number; cmd: string }) => {
  if (m.cmd !== 'writes') return;
  void import('./fleet-writes.js').then(
    (mod) => {
      writes ??= new mod.FleetWrites();
      process.send?.({ id: m.id, ok: true });
    },
    (e: unknown) => process.send?.({ id: m.id, ok: false, error: String(e) }),
  );
});
// The runner stops floors with SIGTERM: the SQLite file and its directory go with the process.
process.once('SIGTERM', () => {
  try {
    writes?.close();
  } finally {
    process.exit(0);
  }
});

serveMemoryProbe(() => ({ devices: wss.clients.size, ready: readyCount, written: writes?.written }));
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const address = server.address();
process.send?.({ id: 0, ok: true, port: typeof address === 'object' && address ? address.port : 0 });
