/**
 * Child processes of a bench run: forked with tsx and an IPC channel, tracked, and always killed at the end
 * (also on failure, Ctrl-C, or an uncaught error): no process outlives the runner.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const children = new Set<Proc>();

export interface Reply {
  id: number;
  ok: boolean;
  error?: string;
  [k: string]: unknown;
}

export class Proc {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve: (r: Reply) => void; reject: (e: Error) => void }>();
  readonly stderr: string[] = [];
  readonly stdout: string[] = [];
  readonly exited: Promise<number | null>;
  readonly hello: Promise<Reply>;

  constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    children.add(this);
    let helloResolve!: (r: Reply) => void;
    let helloReject!: (e: Error) => void;
    this.hello = new Promise<Reply>((res, rej) => {
      helloResolve = res;
      helloReject = rej;
    });
    this.hello.catch(() => {});
    child.on('message', (m: Reply) => {
      if (m.id === 0) return helloResolve(m);
      const w = this.waiting.get(m.id);
      if (!w) return;
      this.waiting.delete(m.id);
      w.resolve(m);
    });
    const keep = (list: string[]) => (chunk: Buffer) => {
      for (const line of chunk.toString().split('\n')) if (line) list.push(line);
      if (list.length > 2000) list.splice(0, list.length - 2000);
    };
    child.stdout?.on('data', keep(this.stdout));
    child.stderr?.on('data', keep(this.stderr));
    this.exited = new Promise((resolve) =>
      child.once('exit', (code) => {
        children.delete(this);
        const err = new Error(`${name} exited (${code}); stderr: ${this.stderr.slice(-5).join(' | ')}`);
        helloReject(err);
        for (const w of this.waiting.values()) w.reject(err);
        this.waiting.clear();
        resolve(code);
      }),
    );
  }

  /** Send a command and await its reply, within `timeoutMs`. */
  request<T extends Reply = Reply>(msg: Record<string, unknown>, timeoutMs = 60_000): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`${this.name}: no reply to ${String(msg['cmd'])} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiting.set(id, {
        resolve: (r) => {
          clearTimeout(timer);
          if (!r.ok && r.error) reject(new Error(`${this.name}: ${r.error}`));
          else resolve(r as T);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      // A child that has gone fails the request (with a callback, a closed channel is an error here, not an
      // 'error' event on the child that nothing handles).
      if (!this.child.connected) return this.failRequest(id, new Error(`${this.name} has exited (${String(this.child.exitCode ?? this.child.signalCode)})`));
      this.child.send({ ...msg, id }, (err) => {
        if (err) this.failRequest(id, new Error(`${this.name}: ${err.message}`));
      });
    });
  }

  private failRequest(id: number, e: Error): void {
    const w = this.waiting.get(id);
    this.waiting.delete(id);
    w?.reject(e);
  }

  /** SIGTERM, then SIGKILL after `graceMs`. */
  async stop(graceMs = 3000): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

export interface SpawnOptions {
  env?: Record<string, string>;
  nodeArgs?: string[];
}

/** Fork a TypeScript entry (relative to the repo root) with tsx and --expose-gc. */
export function spawnTs(name: string, entry: string, o: SpawnOptions = {}): Proc {
  const child = fork(ROOT + entry, [], {
    cwd: ROOT,
    // voxgate-source: @voxgate/* packages resolve to their TypeScript sources, as under vitest.
    execArgv: ['--expose-gc', ...(o.nodeArgs ?? []), '--conditions=voxgate-source', '--import', 'tsx'],
    env: { ...process.env, ...o.env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    serialization: 'json',
  });
  return new Proc(name, child);
}

export async function stopAll(): Promise<void> {
  await Promise.all([...children].map((c) => c.stop()));
}

/** Last resort (process 'exit'): synchronous SIGKILL of anything still running. */
export function killAllNow(): void {
  for (const c of children) {
    try {
      c.child.kill('SIGKILL');
    } catch {
      /* already gone */
    }
  }
}

export function livePids(): number[] {
  return [...children].map((c) => c.child.pid ?? -1);
}

/** A free TCP port on 127.0.0.1 (the OS picks; released before use). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

export { ROOT };
