/**
 * The stdio server with no proxy in front: a raw JSON-RPC client on the server's stdin/stdout (one line per
 * message, as the stdio transport frames them), `initialize` once, then `tools/call` from any number of
 * logical sessions sharing the pipe (as Voxgate and mcp-proxy share one server among their sessions). What
 * it measures is the server's own round trip and CPU per call: the ceiling every proxy in front of it
 * works under.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { LoadSession } from './mcp-load.js';

const PROTOCOL_VERSION = '2025-06-18';

interface Message {
  id?: number;
  result?: { isError?: boolean };
  error?: unknown;
}

export class DirectStdioServer {
  readonly child: ChildProcess;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (m: Message) => void; reject: (e: Error) => void }>();

  /** `command`: the server's command line, e.g. [node, server-everything, 'stdio']. */
  constructor(command: readonly string[]) {
    this.child = spawn(command[0]!, command.slice(1), { stdio: ['pipe', 'pipe', 'ignore'] });
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      let m: Message;
      try {
        m = JSON.parse(line) as Message;
      } catch {
        return; // not a JSON-RPC line (a server's stray output)
      }
      if (typeof m.id !== 'number') return;
      const p = this.pending.get(m.id);
      this.pending.delete(m.id);
      p?.resolve(m);
    });
    this.child.once('exit', (code) => {
      for (const p of this.pending.values()) p.reject(new Error(`the stdio server exited (${code})`));
      this.pending.clear();
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** initialize + notifications/initialized, once for the server. */
  async open(): Promise<void> {
    const init = await this.request('initialize', {
      protocolVersion: PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: { name: 'voxgate-bench-direct', version: '1.0.0' },
    });
    if (!init.result) throw new Error(`initialize: ${JSON.stringify(init).slice(0, 300)}`);
    this.child.stdin!.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
  }

  request(method: string, params: Record<string, unknown>): Promise<Message> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.stdin!.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
    });
  }

  /** A logical session: calls on the shared pipe (nothing to open or close per session). */
  session(): LoadSession {
    return {
      open: async () => undefined,
      call: async (name, args) => {
        const m = await this.request('tools/call', { name, arguments: args });
        if (!m.result || m.result.isError) throw new Error(`tools/call: ${JSON.stringify(m).slice(0, 300)}`);
      },
      close: async () => undefined,
    };
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.stdin!.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 3000);
    this.child.kill('SIGTERM');
    await exited;
    clearTimeout(timer);
  }
}
