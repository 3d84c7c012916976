/**
 * The /mcp rows' floor: the least a Node proxy from Streamable HTTP to a stdio MCP server can do. node:http in,
 * one shared stdio server out (as Voxgate and mcp-proxy share one), each request parsed with JSON.parse, given an
 * id of the relay's own, written as a line, and the server's answer sent back with the caller's id as one JSON body.
 * No authentication, session state, schema, limit, timeout, log or metric: what Node's HTTP and the pipe cost, and
 * nothing else. The proxies' own work is what they add above it.
 *   MCP_RELAY_SERVER='["node","…/server-everything/dist/index.js","stdio"]' (the server's command line, JSON)
 * Tells its parent `{ id: 0, ok: true, port }` once the server answered `initialize` and the socket listens.
 */
import { spawn } from 'node:child_process';
import { createServer, type ServerResponse } from 'node:http';

interface Message {
  jsonrpc: '2.0';
  id?: string | number;
  method?: string;
  params?: unknown;
  result?: unknown;
  error?: unknown;
}

const [command, ...args] = JSON.parse(process.env['MCP_RELAY_SERVER'] ?? '[]') as string[];
if (!command) throw new Error('MCP_RELAY_SERVER: the stdio server command line (a JSON array) is required');
const server = spawn(command, args, { stdio: ['pipe', 'pipe', 'ignore'] });
const stop = () => {
  server.kill('SIGKILL');
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('disconnect', stop);
server.on('exit', () => process.exit(1));

/** The relay's id → who waits for the answer (the caller's own id is kept in that callback). */
const pending = new Map<number, (answer: Message) => void>();
let nextId = 1;
let partial = '';
server.stdout!.setEncoding('utf8');
server.stdout!.on('data', (chunk: string) => {
  const lines = (partial + chunk).split('\n');
  partial = lines.pop()!;
  for (const line of lines) {
    if (line === '') continue;
    const m = JSON.parse(line) as Message;
    const waiting = typeof m.id === 'number' ? pending.get(m.id) : undefined;
    if (!waiting) continue; // the server's notifications: no session to route them to
    pending.delete(m.id as number);
    waiting(m);
  }
});

function ask(method: string, params: unknown, answer: (m: Message) => void): void {
  const id = nextId++;
  pending.set(id, answer);
  server.stdin!.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
}

function json(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), ...headers });
  res.end(body);
}

const initialize = await new Promise<Message>((resolve) =>
  ask('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'mcp-relay-floor', version: '1.0.0' } }, resolve),
);
server.stdin!.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);

let sessions = 0;
const http = createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (c: string) => (body += c));
  req.on('end', () => {
    if (req.method !== 'POST') return void res.writeHead(200).end();
    const m = JSON.parse(body) as Message;
    if (m.id === undefined) return void res.writeHead(202).end();
    const callerId = m.id;
    if (m.method === 'initialize')
      return json(res, 200, JSON.stringify({ jsonrpc: '2.0', id: callerId, result: initialize.result }), { 'mcp-session-id': String(++sessions) });
    ask(m.method ?? '', m.params, (a) => json(res, 200, JSON.stringify({ ...a, id: callerId })));
  });
});
http.listen(0, '127.0.0.1', () => {
  const address = http.address();
  process.send?.({ id: 0, ok: true, port: typeof address === 'object' && address ? address.port : 0 });
});
