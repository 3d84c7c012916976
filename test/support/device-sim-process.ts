import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

export const SIM_BINARY = fileURLToPath(new URL('../../firmware/host/build/voxgate-device-sim', import.meta.url));

export type SimEvent = { event: string; device: string } & Record<string, unknown>;

/** The C++ device simulator as a child process: JSON event lines on stdout, commands on stdin. */
export class DeviceSimProcess {
  readonly events: SimEvent[] = [];
  readonly stderr: string[] = [];
  private readonly child: ChildProcess;
  private waiters: Array<{ pred: (e: SimEvent) => boolean; resolve: (e: SimEvent) => void }> = [];
  readonly exited: Promise<number | null>;

  constructor(args: string[]) {
    if (!existsSync(SIM_BINARY)) throw new Error(`${SIM_BINARY} is missing: build it with "npm run test:firmware" (firmware/host/test.sh) first`);
    this.child = spawn(SIM_BINARY, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.exited = new Promise((resolve) => this.child.on('exit', (code) => resolve(code)));
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      let e: SimEvent;
      try {
        e = JSON.parse(line) as SimEvent;
      } catch {
        this.stderr.push(`(stdout, not JSON) ${line}`);
        return;
      }
      this.events.push(e);
      this.waiters = this.waiters.filter((w) => (w.pred(e) ? (w.resolve(e), false) : true));
    });
    this.child.stderr!.on('data', (b: Buffer) => this.stderr.push(b.toString()));
  }

  /** The first event (past or future) matching `pred`. */
  waitFor(pred: (e: SimEvent) => boolean, timeoutMs = 15_000, what = 'a simulator event'): Promise<SimEvent> {
    const hit = this.events.find(pred);
    if (hit) return Promise.resolve(hit);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no ${what} within ${timeoutMs} ms; stderr: ${this.stderr.join('').slice(-2000)}`)), timeoutMs);
      this.waiters.push({ pred, resolve: (e) => (clearTimeout(timer), resolve(e)) });
    });
  }

  /** Wait for an event that happens after now (ignores the history). */
  waitForNext(pred: (e: SimEvent) => boolean, timeoutMs = 15_000, what = 'a simulator event'): Promise<SimEvent> {
    const seen = this.events.length;
    return this.waitFor((e) => this.events.indexOf(e) >= seen && pred(e), timeoutMs, what);
  }

  command(line: string): void {
    this.child.stdin!.write(`${line}\n`);
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 3000);
    await this.exited;
    clearTimeout(timer);
  }
}
