import type { Logger } from 'pino';

/**
 * What the gateway opened, as a stack: each part registers its closer as it opens, and `close()` runs
 * them last-opened first. A start that fails half-way closes exactly what it opened; a shutdown closes
 * everything in the reverse of the start order. A closer that fails is logged and the others still run;
 * the first failure is thrown at the end.
 */
export class Lifecycle {
  private readonly parts: Array<{ name: string; close: () => unknown }> = [];
  private closing: Promise<void> | undefined;

  constructor(private readonly log: Logger) {}

  /** Register how to close a part that has just opened. */
  defer(name: string, close: () => unknown): void {
    if (this.closing) throw new Error(`cannot open ${name}: the gateway is closing`);
    this.parts.push({ name, close });
  }

  /** Close every part, the last opened first. Idempotent: every call gets the same promise. */
  close(): Promise<void> {
    return (this.closing ??= this.closeAll());
  }

  private async closeAll(): Promise<void> {
    let first: unknown;
    for (const part of this.parts.reverse()) {
      try {
        await part.close();
      } catch (err) {
        this.log.error({ err, part: part.name }, 'closing a part failed; closing the others');
        first ??= err;
      }
    }
    if (first !== undefined) throw first;
  }
}

/** Wait for `p`, but no longer than `ms` (a shutdown deadline: what is left is cut off by the process exit). */
export function within(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)).unref());
  return Promise.race([p.then(() => undefined), deadline]).finally(() => clearTimeout(timer));
}

/** `fn` run at most once (synchronously, on the first call); later calls get the first call's promise (a part closed from two stages). */
export function once<A extends unknown[]>(fn: (...args: A) => unknown): (...args: A) => Promise<void> {
  let done: Promise<void> | undefined;
  return (...args) =>
    (done ??= (async () => {
      await fn(...args);
    })());
}
