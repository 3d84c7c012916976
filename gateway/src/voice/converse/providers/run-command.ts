/**
 * Runs a local speech program (a recogniser or a synthesiser) without a shell: arguments as given (after the
 * caller's placeholder substitution), optional stdin, stdout collected up to a bound, killed with its whole
 * process group on timeout, abort, too much output, or the caller's own guard.
 */
import { spawn } from 'node:child_process';
import { ProviderError } from '../contracts.js';
import { deadline } from './errors.js';

export interface RunOptions {
  command: string;
  args: string[];
  stdin?: Buffer | string | undefined;
  timeoutMs: number;
  signal: AbortSignal;
  maxStdout: number;
  provider: string;
  /**
   * Started with the program and stopped when it ends: a bound of the caller's own (the size of a file the program
   * writes), which ends the program and its group through `kill`, failing the run with `why`.
   */
  guard?: ((kill: (why: ProviderError) => void) => () => void) | undefined;
}

export interface RunResult {
  stdout: Buffer;
  /** The end of stderr (for the log, not for users). */
  stderrTail: string;
}

const STDERR_TAIL = 2048;

export function runCommand(o: RunOptions): Promise<RunResult> {
  const d = deadline(o.signal, o.timeoutMs);
  return new Promise<RunResult>((resolve, reject) => {
    if (d.signal.aborted) {
      d.clear();
      reject(new ProviderError(d.reason() === 'timeout' ? 'timeout' : 'aborted', `${o.command} cancelled`, o.provider));
      return;
    }
    const child = spawn(o.command, o.args, { stdio: ['pipe', 'pipe', 'pipe'], detached: true, shell: false });
    const out: Buffer[] = [];
    let size = 0;
    let stderr = '';
    let failure: ProviderError | undefined;
    const name = o.command.split('/').pop() ?? o.command;
    const kill = (why: ProviderError): void => {
      failure ??= why;
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    };
    const onAbort = (): void =>
      kill(
        new ProviderError(d.reason() === 'timeout' ? 'timeout' : 'aborted', d.reason() === 'timeout' ? `${name} timed out` : `${name} cancelled`, o.provider),
      );
    d.signal.addEventListener('abort', onAbort, { once: true });
    const stopGuard = o.guard?.(kill);
    child.stdout.on('data', (c: Buffer) => {
      size += c.length;
      if (size > o.maxStdout) return kill(new ProviderError('too_long', `${name} wrote more than ${o.maxStdout} bytes`, o.provider));
      out.push(c);
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr = (stderr + c.toString('utf8')).slice(-STDERR_TAIL);
    });
    child.stdin.on('error', () => {}); // a program that does not read its stdin closes it early: not a failure
    let settled = false;
    const settle = (): boolean => {
      if (settled) return false;
      settled = true;
      d.signal.removeEventListener('abort', onAbort);
      d.clear();
      stopGuard?.();
      return true;
    };
    child.on('error', (err: NodeJS.ErrnoException) => {
      failure ??= new ProviderError('process', `${name} could not start (${err.code ?? 'error'})`, o.provider);
      // Without a process there may be no 'close'.
      if (child.pid === undefined && settle()) reject(failure);
    });
    child.on('close', (code, sig) => {
      if (!settle()) return;
      if (failure) return reject(failure);
      if (code !== 0) {
        return reject(new ProviderError('process', `${name} exited with ${code === null ? `signal ${sig}` : `code ${code}`}`, o.provider));
      }
      resolve({ stdout: Buffer.concat(out), stderrTail: stderr });
    });
    if (o.stdin !== undefined) child.stdin.end(o.stdin);
    else child.stdin.end();
  });
}

/** Replaces `{name}` placeholders in each argument (a whole argument or part of one); unknown names stay. */
export function fillArgs(args: readonly string[], values: Record<string, string>): string[] {
  return args.map((a) => a.replace(/\{([a-z]+)\}/g, (m, k: string) => values[k] ?? m));
}
