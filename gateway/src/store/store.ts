/**
 * Persisted state behind one small interface: JSON documents by collection and key. The embedded default
 * is SQLite in the data dir (`sqlite-store.ts`); a server database or a NATS KV bucket can implement the
 * same methods (`nats-kv-store.ts` does, with the cluster on). A write has reached stable storage when its promise resolves.
 */
export interface Store {
  get(collection: string, key: string): Promise<unknown>;
  put(collection: string, key: string, value: unknown): Promise<void>;
  /**
   * Several puts as one write (SQLite: one transaction, one fsync); resolves when all have reached stable storage.
   * `durable: false`, for a batch no caller waits on: the store may skip a sync of its own (a killed process
   * keeps the batch, a power loss may not: sqlite-store.ts).
   */
  putMany(collection: string, entries: ReadonlyArray<{ key: string; value: unknown }>, opts?: { durable?: boolean }): Promise<void>;
  /** True when something was deleted. */
  delete(collection: string, key: string): Promise<boolean>;
  list(collection: string): Promise<Array<{ key: string; value: unknown }>>;
  /**
   * Put-if-absent: writes and answers true only when no document has the key. Atomic across every process
   * that shares the store, so exactly one of several instances wins a claim (fleet/schedules.ts).
   */
  create?(collection: string, key: string, value: unknown): Promise<boolean>;
  close(): Promise<void>;
  /**
   * (shared stores only: `nats-kv-store.ts`) Changes another process wrote to the collection, so what this
   * one keeps in memory follows. `value` is undefined when the document was deleted.
   */
  onChange?(collection: string, fn: (change: StoreChange) => void): () => void;
}

export interface StoreChange {
  key: string;
  value: unknown;
}
