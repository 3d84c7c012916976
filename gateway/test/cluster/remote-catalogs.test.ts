import { Kvm, type KV } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { pino } from 'pino';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RemoteCatalogs } from '../../src/cluster/remote-catalogs.js';
import { catalogKey } from '../../src/cluster/wire.js';
import { ToolCatalog } from '../../src/devices/catalog.js';
import { startNatsServer, type NatsServer } from '../../../test/support/nats-server.js';
import { silentLog } from '../../../test/support/device-parts.js';

/** A catalog of `n` tools named after `prefix`, ~110 bytes each. */
const catalog = (prefix: string, n: number) =>
  ToolCatalog.from(Array.from({ length: n }, (_, i) => ({ name: `${prefix}.${i}`, description: 'd'.repeat(40), inputSchema: { type: 'object' } })));

/** A logger whose lines are kept, and a wait for the next line with a given message. */
function recordingLog() {
  const lines: Array<Record<string, unknown>> = [];
  const waiters: Array<{ msg: string; resolve: (l: Record<string, unknown>) => void }> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      const line = JSON.parse(chunk.toString()) as Record<string, unknown>;
      lines.push(line);
      for (const w of waiters.splice(0))
        if (w.msg === line['msg']) w.resolve(line);
        else waiters.push(w);
      done();
    },
  });
  return {
    log: pino({ level: 'info' }, stream),
    lines,
    next: (msg: string) => new Promise<Record<string, unknown>>((resolve) => waiters.push({ msg, resolve })),
  };
}

/**
 * The other instances' catalogs over a real nats-server's KV bucket: a peer writes catalogs as an instance does
 * (`store`), and a reader keeps them while presence entries name them, within its byte bound.
 */
describe('RemoteCatalogs (the catalogs the cluster presence names)', () => {
  let nats: NatsServer;
  let nc: NatsConnection;
  let kv: KV;
  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    kv = await new Kvm(nc).create('remote-catalogs-test', { history: 1 });
  });
  afterAll(async () => {
    await nc?.close().catch(() => undefined);
    await nats?.stop();
  });

  /** A reader, and a wait for its next load. */
  function reader(limit: number, log = silentLog) {
    let loaded: () => void = () => undefined;
    const r = new RemoteCatalogs({ kv, log, limit, onLoaded: () => loaded() });
    return { r, nextLoad: () => new Promise<void>((resolve) => (loaded = resolve)) };
  }
  const publish = async (c: ToolCatalog) => {
    await new RemoteCatalogs({ kv, log: silentLog, limit: Infinity, onLoaded: () => undefined }).store(c);
    expect(await kv.get(catalogKey(c.hash))).toBeTruthy();
  };

  it('loads a catalog once however many entries name it, and drops it when the last one moves on or goes', async () => {
    const [v1, v2] = [catalog('fw1', 8), catalog('fw2', 8)];
    await publish(v1);
    await publish(v2);
    const { r, nextLoad } = reader(1 << 20);
    let load = nextLoad();
    r.retarget(undefined, v1.hash); // device A
    r.retarget(undefined, v1.hash); // device B, same firmware
    await load;
    expect(r.get(v1.hash)).toBe(v1); // interned: the same object the peer made
    expect(r.size).toBe(1);
    expect(r.bytes).toBe(v1.bytes);

    // A updates its firmware: v1 stays for B, v2 is loaded.
    load = nextLoad();
    r.retarget(v1.hash, v2.hash);
    await load;
    expect(r.size).toBe(2);
    expect(r.bytes).toBe(v1.bytes + v2.bytes);

    // B updates too: nothing names v1 now, and it goes (it used to stay for the life of the process).
    r.retarget(v1.hash, v2.hash);
    expect(r.get(v1.hash)).toBeUndefined();
    expect(r.size).toBe(1);
    expect(r.bytes).toBe(v2.bytes);

    // Both go offline-and-forgotten (their entries deleted): nothing is kept.
    r.retarget(v2.hash, undefined);
    r.retarget(v2.hash, undefined);
    expect(r.size).toBe(0);
    expect(r.bytes).toBe(0);
  });

  it('does not keep a catalog that no entry names by the time it is read', async () => {
    const [c, later] = [catalog('gone', 4), catalog('later', 4)];
    await publish(c);
    await publish(later);
    const { r, nextLoad } = reader(1 << 20);
    r.retarget(undefined, c.hash);
    r.retarget(c.hash, undefined); // before its read came back
    // A read asked after it, on the same connection, comes back after it.
    const loaded = nextLoad();
    r.retarget(undefined, later.hash);
    await loaded;
    expect(r.get(c.hash)).toBeUndefined();
    expect(r.size).toBe(1);
    expect(r.bytes).toBe(later.bytes);
  });

  it('keeps its catalogs within its byte bound: past it a catalog is not loaded, and is loaded when named again with room', async () => {
    const [a, b] = [catalog('budget-a', 10), catalog('budget-b', 10)];
    await publish(a);
    await publish(b);
    const rec = recordingLog();
    const { r, nextLoad } = reader(a.bytes + b.bytes - 1, rec.log);
    const load = nextLoad();
    r.retarget(undefined, a.hash);
    await load;
    const refused = rec.next('cluster catalog not loaded: devices.catalogBudgetBytes is full');
    r.retarget(undefined, b.hash);
    expect(await refused).toMatchObject({ hash: b.hash, bytes: b.bytes, held: a.bytes, budget: a.bytes + b.bytes - 1 });
    expect(r.get(b.hash)).toBeUndefined();
    expect(r.bytes).toBe(a.bytes);

    // a's device goes: room for b, which is loaded when an entry names it again.
    r.retarget(a.hash, undefined);
    const again = nextLoad();
    r.retarget(undefined, b.hash);
    await again;
    expect(r.get(b.hash)).toBe(b);
    expect(r.bytes).toBe(b.bytes);
  });

  it('refuses a stored catalog whose content does not hash to its key', async () => {
    const real = catalog('real', 3);
    const forged = catalog('forged', 3);
    await kv.put(catalogKey(real.hash), JSON.stringify({ tools: forged.tools }));
    const rec = recordingLog();
    const { r } = reader(1 << 20, rec.log);
    const refused = rec.next('cluster catalog refused');
    r.retarget(undefined, real.hash);
    expect(await refused).toMatchObject({ hash: real.hash });
    expect(r.get(real.hash)).toBeUndefined();
    expect(r.bytes).toBe(0);
  });
});
