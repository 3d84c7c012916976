/**
 * Floor for the fleet: a plain `ws` server on a plain HTTP server that accepts connections and keeps
 * them, with no session, no parsing and no heartbeat. What N connected sockets cost, and nothing else.
 */
import { createServer } from 'node:http';
import { WebSocketServer } from 'ws';
import { serveMemoryProbe } from '../procs/ipc.js';

const server = createServer((_req, res) => res.writeHead(404).end());
const wss = new WebSocketServer({ server, perMessageDeflate: false });
wss.on('connection', (ws) => ws.on('error', () => {}));

serveMemoryProbe(() => ({ devices: wss.clients.size }));
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const address = server.address();
process.send?.({ id: 0, ok: true, port: typeof address === 'object' && address ? address.port : 0 });
