import type { CallToolResult } from '@voxgate/protocol';
import type { CatalogTool, ToolCatalog } from './catalog.js';
import type { SessionState, SetupProgress } from './settings.js';

export interface CallOutcome extends CallToolResult {
  durationMs: number;
}

/**
 * What callers of a device need: a local session implements it, and so does a device held by another
 * instance (cluster/cluster.ts), whose calls are forwarded there.
 */
export interface DeviceHandle {
  readonly deviceId: string;
  readonly state: SessionState;
  readonly catalog?: ToolCatalog | undefined;
  /** Set while a setup step is being retried. */
  readonly setup?: SetupProgress | undefined;
  readonly initError?: string | undefined;
  /** Set when the device refused part of its catalog for good (the catalog holds what came before). */
  readonly catalogWarning?: string | undefined;
  findTool(name: string): CatalogTool | undefined;
  call(name: string, args: Record<string, unknown>, opts?: { timeoutMs?: number }): Promise<CallOutcome>;
  /**
   * `call` in callback form, where the handle offers it (a local session): the HTTP route's call then makes no
   * promise of its own. `done` or `failed` is called once, `failed` possibly before this returns.
   */
  callThen?(name: string, args: Record<string, unknown>, opts: { timeoutMs?: number }, done: (out: CallOutcome) => void, failed: (err: unknown) => void): void;
  rpc(method: string, params: Record<string, unknown> | undefined, opts?: { timeoutMs?: number }): Promise<unknown>;
  notify(method: string, params: Record<string, unknown> | undefined): void;
}
