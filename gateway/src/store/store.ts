/**
 * Persisted state behind one small interface: JSON documents by collection and key. The embedded default
 * is SQLite in the data dir (`sqlite-store.ts`); a server database or a NATS KV bucket can implement the
 * same five methods. A write has reached stable storage when its promise resolves.
 */
export interface Store {
  get(collection: string, key: string): Promise<unknown>;
  put(collection: string, key: string, value: unknown): Promise<void>;
  /** True when something was deleted. */
  delete(collection: string, key: string): Promise<boolean>;
  list(collection: string): Promise<Array<{ key: string; value: unknown }>>;
  close(): Promise<void>;
}
