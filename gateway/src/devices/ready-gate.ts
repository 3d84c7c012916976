import type { GatewayError } from '../errors.js';

interface Waiter {
  resolve: () => void;
  reject: (e: GatewayError) => void;
}

/** Callers waiting for a device's setup to finish, each with its own timeout. */
export class ReadyGate {
  private waiters: Waiter[] = [];

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
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(onTimeout());
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }

  open(): void {
    for (const w of this.waiters.splice(0)) w.resolve();
  }

  fail(err: GatewayError): void {
    for (const w of this.waiters.splice(0)) w.reject(err);
  }
}
