import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface NatsServer {
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/**
 * A real nats-server (Debian's package) with JetStream in a temp dir, on a port the OS chose (`-p -1`):
 * the port is read from its "Listening for client connections" line, so no port is guessed.
 */
export function startNatsServer(): Promise<NatsServer> {
  const dir = mkdtempSync(join(tmpdir(), 'voxgate-nats-'));
  const child = spawn('nats-server', ['-a', '127.0.0.1', '-p', '-1', '-js', '-sd', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  return new Promise((resolve, reject) => {
    let out = '';
    const onData = (b: Buffer) => {
      out += b.toString();
      const port = /Listening for client connections on 127\.0\.0\.1:(\d+)/.exec(out)?.[1];
      const jsReady = /Server is ready/.test(out);
      if (port && jsReady) {
        child.stderr!.off('data', onData);
        resolve({ url: `nats://127.0.0.1:${port}`, child, stop });
      }
    };
    child.stderr!.on('data', onData);
    child.once('error', (e) => reject(new Error(`cannot start nats-server (apt-get install nats-server): ${e.message}`)));
    void exited.then(() => reject(new Error(`nats-server exited before it was ready: ${out.slice(-2000)}`)));
  });
}
