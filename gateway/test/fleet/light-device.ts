import { WebSocket, type RawData } from 'ws';

/**
 * A cheap simulated device over WebSocket, for tests with a thousand of them (test/support/reference-device.ts
 * is faithful but heavy). On the wire it does what the firmware does for MCP: `Device-Id`/`Client-Id`/
 * `Protocol-Version` headers, a hello, then answers `initialize`, one `tools/list` page and `tools/call`,
 * every reply an envelope with the session id. Per device: one socket, one small object.
 */
export interface LightTool {
  name: string;
  /** The tool's answer for these arguments: isError true is the device refusing. */
  answer(args: Record<string, unknown>): { text: string; isError: boolean };
}

const HELLO = JSON.stringify({
  type: 'hello',
  version: 1,
  features: { mcp: true },
  transport: 'websocket',
  audio_params: { format: 'opus', sample_rate: 16000, channels: 1, frame_duration: 60 },
});

export class LightDevice {
  /** tools/call requests this device answered, in order. */
  readonly calls: Array<{ tool: string; args: Record<string, unknown> }> = [];
  private ws: WebSocket | undefined;
  private sid = '';
  private readonly initResult: string;
  private readonly listResult: string;

  constructor(
    readonly id: string,
    private readonly tools: readonly LightTool[],
    firmware: string,
  ) {
    this.initResult = JSON.stringify({ protocolVersion: '2024-11-05', capabilities: { tools: {} }, serverInfo: { name: 'light-board', version: firmware } });
    const listed = tools.map((t) => ({
      name: t.name,
      description: `Simulated ${t.name}`,
      inputSchema: { type: 'object', properties: { level: { type: 'integer', minimum: 0, maximum: 100 } } },
    }));
    this.listResult = JSON.stringify({ tools: listed });
  }

  /** Open the socket and say hello; resolves once open (the gateway's ready event says when it is usable). */
  async connect(url: string, attempts = 5): Promise<void> {
    for (let i = 1; ; i++) {
      try {
        return await this.open(url);
      } catch (e) {
        // A refused or reset handshake (a busy machine): try again a little later, as the firmware does.
        if (i >= attempts) throw e;
        await new Promise((resolve) => setTimeout(resolve, 200 * i));
      }
    }
  }

  private open(url: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const ws = new WebSocket(url, {
        headers: { 'Device-Id': this.id, 'Client-Id': this.id, 'Protocol-Version': '1' },
        perMessageDeflate: false,
        handshakeTimeout: 60_000,
      });
      this.ws = ws;
      let opened = false;
      ws.once('open', () => {
        opened = true;
        ws.send(HELLO);
        resolve();
      });
      // Before open: the attempt failed. After: the link dropped, which the gateway reports (device.offline).
      ws.on('error', (err) => {
        if (!opened) reject(err);
      });
      ws.on('message', (data: RawData, isBinary: boolean) => {
        if (!isBinary) this.onText(String(data));
      });
    });
  }

  /** Drop the link as a device losing power does (no close handshake). */
  drop(): void {
    this.ws?.terminate();
    this.ws = undefined;
  }

  private send(id: number, body: string, error = false): void {
    const payload = error ? `{"jsonrpc":"2.0","id":${id},"error":{"message":${body}}}` : `{"jsonrpc":"2.0","id":${id},"result":${body}}`;
    this.ws?.send(`{"session_id":${JSON.stringify(this.sid)},"type":"mcp","payload":${payload}}`);
  }

  private onText(text: string): void {
    let frame: { type?: unknown; session_id?: unknown; payload?: { id?: unknown; method?: unknown; params?: Record<string, unknown> } };
    try {
      frame = JSON.parse(text) as typeof frame;
    } catch {
      return;
    }
    if (frame.type === 'hello' && typeof frame.session_id === 'string') this.sid = frame.session_id;
    const p = frame.payload;
    if (frame.type !== 'mcp' || !p || typeof p.id !== 'number' || typeof p.method !== 'string') return;
    if (p.method === 'initialize') return this.send(p.id, this.initResult);
    if (p.method === 'tools/list') return this.send(p.id, this.listResult);
    if (p.method !== 'tools/call') return this.send(p.id, JSON.stringify(`Method not implemented: ${p.method}`), true);
    const name = p.params?.['name'];
    const args = (p.params?.['arguments'] ?? {}) as Record<string, unknown>;
    const tool = this.tools.find((t) => t.name === name);
    if (!tool) return this.send(p.id, JSON.stringify(`Unknown tool: ${String(name)}`), true);
    this.calls.push({ tool: tool.name, args });
    const out = tool.answer(args);
    this.send(p.id, JSON.stringify({ content: [{ type: 'text', text: out.text }], isError: out.isError }));
  }
}
