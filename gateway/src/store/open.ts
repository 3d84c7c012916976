import { join } from 'node:path';
import type { Logger } from 'pino';
import type { ClusterConfig } from '../cluster/config.js';
import { SqliteStore } from './sqlite-store.js';
import type { Store } from './store.js';

/**
 * The persisted state: with the cluster on, shared by every instance (a KV bucket), else `<dataDir>/voxgate.db`.
 * The NATS store (and its client) loads only with the cluster on.
 */
export async function openStore(cluster: ClusterConfig, dataDir: string, log: Logger): Promise<Store> {
  if (!cluster.enabled) return new SqliteStore(join(dataDir, 'voxgate.db'));
  const { NatsKvStore } = await import('./nats-kv-store.js');
  return NatsKvStore.open(cluster, log);
}
