import { readFileSync } from 'node:fs';
import { JetStreamApiCodes } from '@nats-io/jetstream';
import { Kvm, KvWatchInclude, type KV } from '@nats-io/kv';
import { connect, credsAuthenticator, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import { withoutUserInfo } from '../nats/servers.js';
import type { ClusterConfig } from '../cluster/config.js';
import type { Store, StoreChange } from './store.js';

const decoder = new TextDecoder();

/**
 * The store in a JetStream KV bucket, used when the cluster is on: every instance reads and writes the
 * same documents (enrollments), and hears of the others' writes through one watch. A key is
 * `<collection>.<base64url(key)>` (KV keys allow few characters; device ids have colons). A `put`
 * resolves once JetStream has stored the write.
 */
export class NatsKvStore implements Store {
  /** The revision of this process's last write per KV key: its own writes echoed by the watch are not news. */
  private readonly written = new Map<string, number>();
  private readonly listeners = new Map<string, Set<(c: StoreChange) => void>>();
  private stopWatch: (() => void) | undefined;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly kv: KV,
    private readonly log: Logger,
  ) {}

  static async open(config: ClusterConfig, log: Logger): Promise<NatsKvStore> {
    const creds = config.nats.credsFile;
    const nc = await connect({
      servers: config.nats.servers,
      name: `voxgate-store-${config.instanceId ?? 'gw'}`,
      maxReconnectAttempts: -1,
      ...(creds ? { authenticator: credsAuthenticator(readFileSync(creds)) } : {}),
    }).catch((e: unknown) => {
      throw new Error(`cluster: cannot reach NATS at ${config.nats.servers.map(withoutUserInfo).join(', ')}: ${e instanceof Error ? e.message : String(e)}`);
    });
    try {
      const kv = await new Kvm(nc).create(config.storeBucket, { history: 1, maxValueSize: config.maxMessageBytes });
      const store = new NatsKvStore(nc, kv, log.child({ component: 'store' }));
      await store.watch();
      return store;
    } catch (e) {
      await nc.close();
      throw e;
    }
  }

  private async watch(): Promise<void> {
    const it = await this.kv.watch({ key: '>', include: KvWatchInclude.UpdatesOnly });
    this.stopWatch = () => it.stop();
    void (async () => {
      for await (const e of it) {
        if ((this.written.get(e.key) ?? 0) >= e.revision) continue;
        const dot = e.key.indexOf('.');
        const set = this.listeners.get(e.key.slice(0, dot));
        if (!set?.size || dot < 0) continue;
        let value: unknown;
        try {
          value = e.operation === 'PUT' ? (JSON.parse(decoder.decode(e.value)) as unknown) : undefined;
        } catch {
          this.log.warn({ key: e.key }, 'unreadable document in the shared store ignored');
          continue;
        }
        const change = { key: Buffer.from(e.key.slice(dot + 1), 'base64url').toString(), value };
        for (const fn of set) fn(change);
      }
    })().catch((err: unknown) => this.log.warn({ err }, 'shared store watch ended'));
  }

  async get(collection: string, key: string): Promise<unknown> {
    const e = await this.kv.get(kvKey(collection, key));
    return e && e.operation === 'PUT' ? (JSON.parse(decoder.decode(e.value)) as unknown) : undefined;
  }

  async put(collection: string, key: string, value: unknown): Promise<void> {
    const k = kvKey(collection, key);
    this.written.set(k, await this.kv.put(k, JSON.stringify(value)));
  }

  /** JetStream has no multi-key transaction: the puts go out together and each is acknowledged. */
  async putMany(collection: string, entries: ReadonlyArray<{ key: string; value: unknown }>): Promise<void> {
    await Promise.all(entries.map((e) => this.put(collection, e.key, e.value)));
  }

  /** `kv.create` writes only when the key holds nothing (or a delete marker): JetStream refuses a second writer. */
  async create(collection: string, key: string, value: unknown): Promise<boolean> {
    const k = kvKey(collection, key);
    try {
      this.written.set(k, await this.kv.create(k, JSON.stringify(value)));
      return true;
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      if (code === JetStreamApiCodes.StreamWrongLastSequence || code === JetStreamApiCodes.StreamWrongLastSequenceUnknown) return false;
      throw e;
    }
  }

  async delete(collection: string, key: string): Promise<boolean> {
    const k = kvKey(collection, key);
    const existed = (await this.kv.get(k))?.operation === 'PUT';
    await this.kv.delete(k);
    return existed;
  }

  async list(collection: string): Promise<Array<{ key: string; value: unknown }>> {
    const keys: string[] = [];
    for await (const k of await this.kv.keys(`${collection}.>`)) keys.push(k);
    const out: Array<{ key: string; value: unknown }> = [];
    for (const k of keys) {
      const e = await this.kv.get(k);
      if (e?.operation === 'PUT')
        out.push({ key: Buffer.from(k.slice(collection.length + 1), 'base64url').toString(), value: JSON.parse(decoder.decode(e.value)) as unknown });
    }
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  onChange(collection: string, fn: (c: StoreChange) => void): () => void {
    let set = this.listeners.get(collection);
    if (!set) this.listeners.set(collection, (set = new Set()));
    set.add(fn);
    return () => void set.delete(fn);
  }

  async close(): Promise<void> {
    this.stopWatch?.();
    await this.nc.drain().catch(() => undefined);
  }
}

function kvKey(collection: string, key: string): string {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(collection)) throw new Error(`store collection "${collection.slice(0, 64)}" is not a KV-safe name`);
  return `${collection}.${Buffer.from(key).toString('base64url')}`;
}
