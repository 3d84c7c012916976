import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type { JSONRPCMessage, Transport } from '@modelcontextprotocol/client';
import { clientSdk, clientSdkLoaded, loadClientSdk } from './client-sdk.js';
import { checkMessage } from './jsonrpc-check.js';
import { BoundedLineReader, idOfTruncated } from './line-reader.js';
import { UNREAD_FULL, type UnreadPlace, type UnreadShare } from './unread-total.js';
import type { ByteBudget } from '../throttle/token-bucket.js';

/** JSON-RPC error code of the answer made up for a request whose real answer was over the size limit. */
export const RESULT_TOO_LARGE = -32099;

/**
 * A stdio client transport that owns its child's whole process group. The SDK's `StdioClientTransport`
 * signals only the direct child, so a server started through `npx` or a shell leaves its real process
 * behind; here the child leads its own group and `close()` sends SIGTERM to the group, then SIGKILL after
 * the grace period, and resolves only when the child has exited. stderr is kept (last lines) for
 * `GET /v1/mcp/servers`, never forwarded to our own stderr.
 */
export interface ChildStdioOptions {
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd?: string;
  killGraceMs: number;
  /** A message over this is skipped unread (its request answered RESULT_TOO_LARGE); the server stays connected. */
  maxMessageBytes: number;
  /** mcp.maxResultBytes, named in the answer made up for a skipped message. */
  maxResultBytes: number;
  onStderr?: (line: string) => void;
  onOversized?: (info: { bytes: number; id: string | number | undefined }) => void;
  /**
   * Bytes the child may leave unread on its stdin before the next write (checked before each, so one large message
   * always leaves whole); past it the write is refused (it throws: the call it carried fails) and told through
   * `onUnread`. Unset: unbounded.
   */
  maxUnreadBytes?: number;
  onUnread?: (unread: number) => void;
  /**
   * The gateway's total of what its peers leave unread, and this server's group in it (hub/unread-total.ts): a write
   * that does not fit is refused (it throws); cut to make room for another's, the server goes as if it had crashed
   * (what waits for it dropped, its process group killed: restarted with the backoff). Unset: only maxUnreadBytes.
   */
  unread?: UnreadPlace | undefined;
  /**
   * What the server's output spends (throttle/token-bucket.ts byteBudget): `take` answers how long (ms) to stop reading
   * its stdout (0: go on). The chunk in hand is handled; its writes wait in the pipe meanwhile. Unset: read as it comes.
   */
  readBudget?: ByteBudget | undefined;
  /** Reading paused for the read budget. */
  onReadPaused?: (() => void) | undefined;
}

/**
 * Takes the messages it answers itself before the SDK sees them (hub/upstream/tool-lane.ts): `take` returns true for
 * those; `closed` is told when the connection ended, after `onclose`.
 */
export interface MessageTap {
  take(message: JSONRPCMessage): boolean;
  closed(): void;
  /** Calls waiting for their answer (the one being written among them). */
  readonly size?: number;
}

/**
 * After the child exits, how long its pipes may stay open before the connection is ended anyway: long enough to read
 * what it wrote last (its pipes normally close with it, and the connection ends then, as before), short enough that a
 * helper holding them (a shell wrapper's or npx's, inheriting stdout) cannot keep a dead server "ready".
 */
const EXIT_DRAIN_MS = 100;

/** The environment a child inherits when its config names no variable: enough to find and run programs. */
const INHERITED = ['HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER', 'LANG', 'TMPDIR', 'NODE_EXTRA_CA_CERTS', 'SYSTEMROOT'];

export class ChildStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private child: ChildProcess | undefined;
  private readonly lines: BoundedLineReader;
  private exited: Promise<void> = Promise.resolve();
  private closing = false;
  exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  /** Set once the SDK Client is connected: the gateway's own `tools/call` lane. */
  tap: MessageTap | undefined;

  constructor(private readonly o: ChildStdioOptions) {
    this.lines = new BoundedLineReader(o.maxMessageBytes);
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  start(): Promise<void> {
    if (this.child) throw new Error('already started');
    // The SDK's client side reads and writes the messages (hub/client-sdk.ts): loaded before the child runs.
    if (!clientSdkLoaded()) return loadClientSdk().then(() => this.start());
    // Closed before it started (the hub shut down while connecting): no child may outlive close().
    if (this.closing) return Promise.reject(new Error('the transport was closed before it started'));
    const env: Record<string, string> = {};
    for (const k of INHERITED) if (process.env[k] !== undefined) env[k] = process.env[k]!;
    Object.assign(env, this.o.env);
    return new Promise((resolve, reject) => {
      const child = spawn(this.o.command, this.o.args, { env, cwd: this.o.cwd, stdio: ['pipe', 'pipe', 'pipe'], detached: true, shell: false });
      this.child = child;
      this.exited = new Promise((res) => child.once('exit', () => res()));
      child.once('error', (e) => {
        reject(e);
        this.onerror?.(e);
      });
      child.once('spawn', () => {
        if (this.o.unread) this.share = this.o.unread.total.join(this.o.unread, () => this.cut(child));
        resolve();
      });
      let drain: NodeJS.Timeout | undefined;
      child.once('exit', (code, signal) => {
        this.exitInfo = { code, signal };
        if (this.closing) return; // close() ends the group itself
        // The server is gone: what is left of its group goes too (it would hold the pipes, and outlive close()), and
        // the pipes are cut, so that the connection ends (calls in flight fail, the hub marks the server) now.
        drain = setTimeout(() => {
          signalGroup(child, 'SIGKILL');
          for (const s of [child.stdin, child.stdout, child.stderr]) s?.destroy();
        }, EXIT_DRAIN_MS);
        drain.unref();
      });
      child.once('close', () => {
        clearTimeout(drain);
        this.share?.leave();
        this.child = undefined;
        this.lines.clear();
        this.onclose?.();
        this.tap?.closed();
      });
      child.stdin!.on('error', (e) => this.onerror?.(e));
      child.stdout!.on('data', (chunk: Buffer) => {
        this.spend(child, chunk.length);
        for (const line of this.lines.push(chunk)) {
          if (line.kind === 'oversized') {
            this.oversized(line.bytes, idOfTruncated(line.head, line.tail));
            continue;
          }
          if (!line.text.trim()) continue;
          let msg: JSONRPCMessage;
          try {
            msg = readMessage(line.text);
          } catch (e) {
            this.onerror?.(e as Error);
            continue;
          }
          this.deliver(msg);
        }
      });
      let partial = '';
      child.stderr!.setEncoding('utf8');
      child.stderr!.on('data', (s: string) => {
        const lines = (partial + s).split('\n');
        partial = lines.pop()!.slice(-4096);
        for (const l of lines) if (l.trim()) this.o.onStderr?.(l.slice(0, 2000));
      });
    });
  }

  /**
   * One message per microtask, in order. The SDK runs notification handlers a microtask later but settles
   * responses at once: a progress notification and the response read from the same chunk would otherwise
   * lose the notification (its handler is gone by the time it runs). A message the tap takes (an answer to the
   * gateway's own lane, its progress) is handled at once when nothing is queued before it: the order stays the
   * server's, without a promise per answer.
   */
  private delivery: Promise<void> = Promise.resolve();
  private queued = 0;
  private deliver(msg: JSONRPCMessage): void {
    const tried = this.queued === 0 && this.tap !== undefined;
    if (tried && this.tapped(msg)) return;
    this.queued++;
    this.delivery = this.delivery.then(() => {
      this.queued--;
      try {
        if (tried || !this.tapped(msg)) this.onmessage?.(msg);
      } catch (e) {
        this.onerror?.(e as Error);
      }
    });
  }

  /** The tap took the message (a failure in it is reported, and the message counts as taken). */
  private tapped(msg: JSONRPCMessage): boolean {
    try {
      return this.tap?.take(msg) ?? false;
    } catch (e) {
      this.onerror?.(e as Error);
      return true;
    }
  }

  /** Answer the request the skipped message was for, so that its caller hears why at once. */
  private oversized(bytes: number, id: string | number | undefined): void {
    this.o.onOversized?.({ bytes, id });
    const message = `the server's answer was ${bytes} bytes, over the limit of ${this.o.maxResultBytes} bytes (mcp.maxResultBytes)`;
    if (id === undefined) this.onerror?.(new Error(`skipped a message from the server: ${message}`));
    else this.deliver({ jsonrpc: '2.0', id, error: { code: RESULT_TOO_LARGE, message } });
  }

  async send(message: JSONRPCMessage): Promise<void> {
    const drained = this.write(message);
    if (drained) await drained;
  }

  /**
   * `send` without a promise of its own: throws when the process is not running, returns a promise only when the
   * pipe is full (resolved at 'drain'). The messages of one turn of the event loop (concurrent /mcp calls) leave in
   * one write: one syscall and one wake-up of the server instead of one per message (issue 21). Order is kept;
   * end() flushes. A lone call leaves at once: no other call of the lane waiting, nothing corked, and the last write
   * carried one message (calls are not arriving several per turn, as at c=10 or c=50, where the batch is kept). The
   * server is idle then, and what the rest of this turn does (the caller's bookkeeping) runs while it works, not
   * before it starts (issue 21, the /mcp c=1 row: `mcpc1b`).
   */
  write(message: JSONRPCMessage): Promise<void> | undefined {
    const stdin = this.child?.stdin;
    if (!stdin || this.closing) throw new Error('the server process is not running');
    // A child that reads nothing while it sends requests (each answered, its id echoed back up to the message bound
    // long) had every answer kept in the gateway's memory: ~860 MB from one child in seconds (red team 10).
    const unread = stdin.writableLength;
    if (this.o.maxUnreadBytes !== undefined && unread > this.o.maxUnreadBytes) {
      this.o.onUnread?.(unread);
      throw new Error(`the server is not reading its input: ${unread} bytes written to it wait unread (over ${this.o.maxUnreadBytes})`);
    }
    const text = clientSdk().serializeMessage(message);
    const share = this.share;
    // Counted until the pipe has taken it (the write's callback): what waits in memory is what is counted.
    const bytes = share ? Buffer.byteLength(text) : 0;
    if (share && !share.take(bytes)) throw new Error(UNREAD_FULL);
    const done = share ? () => share.give(bytes) : undefined;
    if (!this.corked && this.lastBatch <= 1 && (this.tap?.size ?? 0) <= 1) {
      this.lastBatch = 1;
      if (stdin.write(text, done)) return undefined;
      return this.drained(stdin);
    }
    if (!this.corked) {
      this.corked = true;
      stdin.cork();
      setImmediate(() => {
        this.corked = false;
        this.lastBatch = this.batch;
        this.batch = 0;
        stdin.uncork();
      });
    }
    this.batch++;
    if (stdin.write(text, done)) return undefined;
    return this.drained(stdin);
  }

  private readPaused = false;

  /** The read budget: past it the server's stdout is not read until the deficit is repaid (what was read is handled). */
  private spend(child: ChildProcess, bytes: number): void {
    const wait = this.o.readBudget?.take(bytes) ?? 0;
    if (wait <= 0 || this.readPaused) return;
    this.readPaused = true;
    child.stdout?.pause();
    this.o.onReadPaused?.();
    setTimeout(() => {
      this.readPaused = false;
      child.stdout?.resume();
    }, wait).unref();
  }

  /** This server's part of the gateway's unread total (with `unread`, from its spawn to its pipes' close). */
  private share: UnreadShare | undefined;

  /** Cut for the gateway's unread total: what waits for it is dropped with its stdin, and its group killed (then restarted). */
  private cut(child: ChildProcess): void {
    child.stdin?.destroy();
    signalGroup(child, 'SIGKILL');
  }

  /** One promise for every write waiting on a full pipe (a listener each was one more 'drain' listener per message). */
  private drained(stdin: NonNullable<ChildProcess['stdin']>): Promise<void> {
    return (this.draining ??= new Promise<void>((resolve) =>
      stdin.once('drain', () => {
        this.draining = undefined;
        resolve();
      }),
    ));
  }
  private draining: Promise<void> | undefined;
  private corked = false;
  /** Messages corked in this turn, and in the last write. */
  private batch = 0;
  private lastBatch = 0;

  /** TERM the group, KILL it after the grace period; resolves when the child has exited. */
  async close(): Promise<void> {
    const child = this.child;
    this.closing = true;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    try {
      child.stdin?.end();
    } catch {
      /* already closed */
    }
    signalGroup(child, 'SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<'grace'>((resolve) => (timer = setTimeout(() => resolve('grace'), this.o.killGraceMs)));
    const r = await Promise.race([this.exited.then(() => 'exited' as const), graceOver]);
    clearTimeout(timer);
    if (r === 'grace') {
      signalGroup(child, 'SIGKILL');
      await this.exited;
    } else signalGroup(child, 'SIGKILL'); // whatever else is left in the group
    // Signals are delivered asynchronously: wait (bounded) until no live member of the group is left.
    const deadline = Date.now() + this.o.killGraceMs;
    while (child.pid !== undefined && groupHasLiveMembers(child.pid) && Date.now() < deadline) await new Promise((res) => setTimeout(res, 10));
  }
}

/**
 * One line from the server as a JSON-RPC message. The everyday answer, a result without `_meta`, is checked by hand
 * (jsonrpc-check.ts: the SDK schema's rules without its zod union; issue 21: ~8 KB allocated and ~2 % of the CPU per
 * /mcp call) and given the shape the schema gives it (`jsonrpc`, `id`, `result` in that order, `result` as it came).
 * Everything else (requests, notifications, errors, a result with `_meta`, which the schema reorders, anything
 * invalid, any line naming `__proto__`) goes through the SDK's own parse, as before: the same value or the same error.
 */
export function readMessage(text: string): JSONRPCMessage {
  if (!text.includes('__proto__')) {
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {
      raw = undefined;
    }
    const m = raw === undefined ? undefined : checkMessage(raw);
    if (m && 'result' in m && !Object.hasOwn(m.result, '_meta')) return { jsonrpc: '2.0', id: m.id, result: m.result };
  }
  return clientSdk().deserializeMessage(text);
}

/** Linux: any process of this group that is not a zombie. Elsewhere: assume the signals did their work. */
function groupHasLiveMembers(pgid: number): boolean {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return false;
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // rest[0] = state, rest[1] = ppid, rest[2] = pgrp
      if (Number(rest[2]) === pgid && rest[0] !== 'Z' && rest[0] !== 'X') return true;
    } catch {
      /* exited meanwhile */
    }
  }
  return false;
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    try {
      child.kill(signal);
    } catch {
      /* gone */
    }
  }
}
