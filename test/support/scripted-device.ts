import { WebSocket, type RawData } from 'ws';
import { AsyncQueue, once } from './wait.js';

/** A JSON-RPC request the gateway sent to the device. */
export interface ScriptedRequest {
  id: number;
  method: string;
  params: Record<string, unknown> | undefined;
}

export interface ScriptedTool {
  name: string;
  description?: string;
  inputSchema: Record<string, unknown>;
  annotations?: Record<string, unknown>;
  /** The raw `result` JSON text a tools/call of this tool gets (default: the arguments echoed as text). */
  result?: string;
}

/**
 * A bare WebSocket "device" whose every byte the test writes: for hostile devices (forged replies,
 * schemas no real firmware sends). Requests from the gateway queue up in `requests`, unless `serve`
 * answers them like a well-behaved device.
 */
export class ScriptedWsDevice {
  readonly requests = new AsyncQueue<ScriptedRequest>();
  private served: ScriptedTool[] | undefined;

  /** The raw socket: for frames a device's own code would never write (pings, fragments, close frames). */
  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data: RawData, isBinary: boolean) => {
      if (isBinary) return;
      const frame = JSON.parse(String(data)) as { type?: string; payload?: { id?: unknown; method?: unknown; params?: Record<string, unknown> } };
      const p = frame.payload;
      if (frame.type !== 'mcp' || typeof p?.id !== 'number' || typeof p.method !== 'string') return;
      const req = { id: p.id, method: p.method, params: p.params };
      if (!this.serve(req)) this.requests.push(req);
    });
  }

  /** Connect, say hello, and (with `tools`) answer initialize, tools/list and tools/call by itself. */
  static async connect(wsUrl: string, deviceId: string, tools?: ScriptedTool[]): Promise<ScriptedWsDevice> {
    const ws = new WebSocket(wsUrl, { headers: { 'Device-Id': deviceId, 'Client-Id': `scripted-${deviceId}` }, perMessageDeflate: false });
    await once(ws, 'open');
    const d = new ScriptedWsDevice(ws);
    d.served = tools;
    d.send(JSON.stringify({ type: 'hello', version: 1, features: { mcp: true }, transport: 'websocket' }));
    return d;
  }

  /** The next request, which must be for `method`. */
  async next(method: string): Promise<ScriptedRequest> {
    const r = await this.requests.next(10_000, `a ${method} request`);
    if (r.method !== method) throw new Error(`expected ${method}, got ${r.method}`);
    return r;
  }

  send(text: string): void {
    this.ws.send(text);
  }

  /** A reply in the reference firmware's exact layout. */
  reply(id: number, resultJson: string, sessionId = 's'): void {
    this.send(`{"session_id":"${sessionId}","type":"mcp","payload":{"jsonrpc":"2.0","id":${id},"result":${resultJson}}}`);
  }

  close(): void {
    this.ws.terminate();
  }

  private serve(r: ScriptedRequest): boolean {
    if (!this.served) return false;
    if (r.method === 'initialize')
      this.reply(r.id, '{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"scripted","version":"1"}}');
    else if (r.method === 'tools/list') this.reply(r.id, JSON.stringify({ tools: this.served.map(({ result: _r, ...tool }) => tool) }));
    else if (r.method === 'tools/call') {
      const tool = this.served.find((x) => x.name === r.params?.['name']);
      this.reply(r.id, tool?.result ?? JSON.stringify({ content: [{ type: 'text', text: JSON.stringify(r.params?.['arguments'] ?? {}) }], isError: false }));
    } else return false;
    return true;
  }
}
