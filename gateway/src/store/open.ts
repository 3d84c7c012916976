import { join } from 'node:path';
import type { Logger } from 'pino';
import type { ClusterConfig } from '../cluster/config.js';
import { NatsKvStore } from './nats-kv-store.js';
import { SqliteStore } from './sqlite-store.js';
import type { Store } from './store.js';

/** The persisted state: with the cluster on, shared by every instance (a KV bucket), else `<dataDir>/voxgate.db`. */
export async function openStore(cluster: ClusterConfig, dataDir: string, log: Logger): Promise<Store> {
  return cluster.enabled ? NatsKvStore.open(cluster, log) : new SqliteStore(join(dataDir, 'voxgate.db'));
}
