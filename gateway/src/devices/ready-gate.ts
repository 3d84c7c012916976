import type { GatewayError } from '../errors.js';

interface Waiter {
  resolve: () => void;
  reject: (e: GatewayError) => void;
}

/** Callers waiting for a device's setup to finish, each with its own timeout. */
export class ReadyGate {
  /** Made when the first caller waits: most sessions are ready before anyone asks. */
  private waiters: Waiter[] | undefined;

  /** Resolves at `open`, rejects at `fail` or, after `timeoutMs`, with `onTimeout()`. */
  wait(timeoutMs: number, onTimeout: () => GatewayError): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters?.filter((w) => w !== waiter);
        reject(onTimeout());
      }, timeoutMs);
      (this.waiters ??= []).push(waiter);
    });
  }

  open(): void {
    const waiters = this.waiters;
    this.waiters = undefined;
    for (const w of waiters ?? []) w.resolve();
  }

  fail(err: GatewayError): void {
    const waiters = this.waiters;
    this.waiters = undefined;
    for (const w of waiters ?? []) w.reject(err);
  }
}
