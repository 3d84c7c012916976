import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface NatsServer {
  url: string;
  child: ChildProcess;
  /** Stop it and start it again on the same port with the same JetStream store (a NATS restart). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A real nats-server (Debian's package) with JetStream in a temp dir, on a port the OS chose (`-p -1`):
 * the port is read from its "Listening for client connections" line, so no port is guessed.
 */
export async function startNatsServer(): Promise<NatsServer> {
  const dir = mkdtempSync(join(tmpdir(), 'voxgate-nats-'));
  let run: { child: ChildProcess; exited: Promise<void>; port: string };
  try {
    run = await launch(dir, '-1');
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const halt = async () => {
    if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGTERM');
    await run.exited;
  };
  return {
    url: `nats://127.0.0.1:${run.port}`,
    get child() {
      return run.child;
    },
    async restart() {
      await halt();
      run = await launch(dir, run.port);
    },
    async stop() {
      await halt();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** nats-server with JetStream in `dir` on `port` ('-1': the OS chooses), resolved once it serves. */
function launch(dir: string, port: string): Promise<{ child: ChildProcess; exited: Promise<void>; port: string }> {
  const child = spawn('nats-server', ['-a', '127.0.0.1', '-p', port, '-js', '-sd', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    let out = '';
    const onData = (b: Buffer) => {
      out += b.toString();
      const listening = /Listening for client connections on 127\.0\.0\.1:(\d+)/.exec(out)?.[1];
      if (listening && /Server is ready/.test(out)) {
        child.stderr!.off('data', onData);
        resolve({ child, exited, port: listening });
      }
    };
    child.stderr!.on('data', onData);
    child.once('error', (e) => reject(new Error(`cannot start nats-server (apt-get install nats-server): ${e.message}`)));
    void exited.then(() => reject(new Error(`nats-server exited before it was ready: ${out.slice(-2000)}`)));
  });
}
