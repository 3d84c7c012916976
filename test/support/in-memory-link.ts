/**
 * An in-memory `DeviceLink` and the device end it is wired to (like the MCP SDK's
 * `InMemoryTransport.createLinkedPair()`): a session, a channel or a setup walk can be tested with no
 * gateway and no sockets. Frames cross in a later macrotask, as they do over a socket.
 */
import type { DeviceLink } from '../../gateway/src/devices/link.js';

/** What the gateway side delivers frames to (a DeviceSession, or a test's own handler). */
export interface LinkReceiver {
  onText(text: string): void;
  onBinary?(data: Buffer): void;
  onClosed?(reason: string): void;
}

export interface JsonRpcRequest {
  id: number;
  method: string;
  params?: Record<string, unknown>;
}

interface Waiter {
  match: (text: string) => boolean;
  resolve: (text: string) => void;
}

/** The gateway's side: what a link (ws, mqtt) would be. */
export class InMemoryLink implements DeviceLink {
  readonly remoteAddress = '127.0.0.1';
  readonly localAddress = '127.0.0.1';
  closed: { code: number; reason: string } | undefined;
  /** Bytes the link reports queued (tests of back-pressure set it). */
  buffered = 0;
  receiver: LinkReceiver | undefined;

  constructor(
    readonly transport: 'websocket' | 'mqtt',
    private readonly peer: InMemoryDevice,
  ) {}

  send(text: string): boolean {
    if (this.closed) return false;
    this.peer.deliver(text);
    return true;
  }

  sendBinary(data: Buffer): boolean {
    if (this.closed) return false;
    this.peer.binary.push(data);
    return true;
  }

  bufferedBytes(): number {
    return this.buffered;
  }

  close(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = { code, reason };
    setImmediate(() => this.receiver?.onClosed?.(`closed (${code})`));
  }
}

/** The device's side: every frame the gateway sent, waits for the next one, and sends frames back. */
export class InMemoryDevice {
  readonly frames: string[] = [];
  readonly binary: Buffer[] = [];
  private readonly waiters: Waiter[] = [];
  private seen = 0;
  link!: InMemoryLink;

  /** Send one text frame to the gateway side. */
  send(text: string): void {
    setImmediate(() => this.link.receiver?.onText(text));
  }

  /** An MCP frame in the firmware's layout: envelope first, then the payload. */
  sendMcp(payload: Record<string, unknown>, sessionId = ''): void {
    this.send(JSON.stringify({ session_id: sessionId, type: 'mcp', payload }));
  }

  reply(id: number, result: unknown): void {
    this.sendMcp({ jsonrpc: '2.0', id, result });
  }

  replyError(id: number, message: string, code?: number): void {
    this.sendMcp({ jsonrpc: '2.0', id, error: code === undefined ? { message } : { code, message } });
  }

  /** The next frame sent after the ones already taken (in order), matching `match`. */
  next(match: (text: string) => boolean = () => true, timeoutMs = 15_000): Promise<string> {
    for (; this.seen < this.frames.length;) {
      const text = this.frames[this.seen++]!;
      if (match(text)) return Promise.resolve(text);
    }
    return new Promise<string>((resolve, reject) => {
      const waiter: Waiter = { match, resolve };
      this.waiters.push(waiter);
      setTimeout(() => {
        const i = this.waiters.indexOf(waiter);
        if (i < 0) return;
        this.waiters.splice(i, 1);
        reject(new Error(`no matching frame within ${timeoutMs} ms (${this.frames.length} sent)`));
      }, timeoutMs).unref();
    });
  }

  /** The next JSON-RPC request (MCP frame with an id) for `method`. */
  async nextRequest(method?: string, timeoutMs?: number): Promise<JsonRpcRequest> {
    const text = await this.next((t) => {
      const p = mcpPayload(t);
      return p !== undefined && typeof p['id'] === 'number' && (method === undefined || p['method'] === method);
    }, timeoutMs);
    return mcpPayload(text) as unknown as JsonRpcRequest;
  }

  /** A frame from the gateway; wakes the first waiter it matches. */
  deliver(text: string): void {
    this.frames.push(text);
    const i = this.waiters.findIndex((w) => w.match(text));
    if (i < 0) return;
    this.seen = this.frames.length;
    this.waiters.splice(i, 1)[0]!.resolve(text);
  }

  /** The device goes away: the gateway side learns it as a link close. */
  disconnect(reason = 'device disconnected'): void {
    setImmediate(() => this.link.receiver?.onClosed?.(reason));
  }
}

function mcpPayload(text: string): Record<string, unknown> | undefined {
  try {
    const frame = JSON.parse(text) as { type?: unknown; payload?: unknown };
    const isMcp = frame.type === 'mcp' && typeof frame.payload === 'object' && frame.payload !== null;
    return isMcp ? (frame.payload as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** A linked pair: frames the link sends reach the device end; frames the device sends reach the link's receiver. */
export function createLinkedPair(transport: 'websocket' | 'mqtt' = 'websocket'): [InMemoryLink, InMemoryDevice] {
  const device = new InMemoryDevice();
  const link = new InMemoryLink(transport, device);
  device.link = link;
  return [link, device];
}
