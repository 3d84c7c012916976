import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach } from 'vitest';
import type { CallOutcome } from '../../src/devices/device-handle.js';
import { GatewayError } from '../../src/errors.js';
import { EventBus, type GatewayEvent } from '../../src/events/bus.js';
import { FleetSlice, type FleetConfig } from '../../src/fleet/config.js';
import type { KeyGrants } from '../../src/fleet/key-grants.js';
import type { DeviceSelector } from '../../src/fleet/ports.js';
import { startFleet, type Fleet } from '../../src/fleet/start.js';
import type { JobFilter } from '../../src/fleet/types.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import type { Store, StoreChange } from '../../src/store/store.js';

/**
 * The fleet's parts over a real SqliteStore in a temp folder and a fake device port: simulated devices are
 * plain objects (no session, no link), each answering `call` after a macrotask. What is real: the store, the
 * event bus, the queue, the delivery and the job runner.
 */
export interface FakeDevice {
  id: string;
  ready: boolean;
  board?: string;
  /** The tool answers with isError (the device refuses). */
  fails?: boolean;
  /** Thrown instead of answering (a timeout, the device busy). */
  throws?: GatewayError;
  /** Calls this device ran, in order. */
  ran: Array<{ tool: string; args: Record<string, unknown>; at: number }>;
  /** Held calls: resolve them to answer. */
  hold?: boolean;
  held: Array<() => void>;
}

export class FakeFleet {
  readonly devices = new Map<string, FakeDevice>();
  readonly events: GatewayEvent[] = [];
  inFlight = 0;
  maxInFlight = 0;

  constructor(readonly bus: EventBus) {
    bus.subscribe((e) => this.events.push(e));
  }

  add(id: string, o: Partial<Omit<FakeDevice, 'id' | 'ran' | 'held'>> = {}): FakeDevice {
    const d: FakeDevice = { id, ready: false, ran: [], held: [], ...o };
    this.devices.set(id, d);
    return d;
  }

  /** The device comes online and ready, announced as the registry does. */
  connect(id: string): void {
    this.devices.get(id)!.ready = true;
    this.bus.publish('device.ready', id, {});
  }

  readyHere = (id: string) => {
    const d = this.devices.get(id);
    if (!d?.ready) return undefined;
    return {
      call: (tool: string, args: Record<string, unknown>): Promise<CallOutcome> => {
        d.ran.push({ tool, args, at: Date.now() });
        this.inFlight++;
        this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
        return new Promise<CallOutcome>((resolve, reject) => {
          const answer = () => {
            this.inFlight--;
            if (d.throws) return reject(d.throws);
            resolve({ content: [{ type: 'text', text: d.fails ? 'refused' : 'ok' }], isError: d.fails === true, durationMs: 1 });
          };
          if (d.hold) d.held.push(answer);
          else setImmediate(answer);
        });
      },
    };
  };

  selector: DeviceSelector = {
    select: async (f: JobFilter) =>
      [...this.devices.values()].filter((d) => (!f.board || d.board === f.board) && (!f.ids || f.ids.includes(d.id))).map((d) => d.id),
  };

  /** The first event (past or future) that matches. */
  event(match: (e: GatewayEvent) => boolean): Promise<GatewayEvent> {
    const hit = this.events.find(match);
    if (hit) return Promise.resolve(hit);
    return new Promise((resolve) => {
      const off = this.bus.subscribe((e) => {
        if (match(e)) {
          off();
          resolve(e);
        }
      });
    });
  }
}

export interface Rig {
  dir: string;
  store: Store;
  fleet: Fleet;
  fake: FakeFleet;
  /** Close the fleet and the store (a restart keeps the folder). */
  stop(): Promise<void>;
}

export const tempDir = () => mkdtempSync(join(tmpdir(), 'voxgate-fleet-'));
export const removeDir = (dir: string) => rmSync(dir, { recursive: true, force: true });

export const fleetConfig = (o: Partial<FleetConfig> = {}): FleetConfig => ({ ...FleetSlice.parse({}), sweepIntervalMs: 600_000, progressIntervalMs: 50, ...o });

/** A fleet over the store in `dir` (opened fresh: a second call on the same folder is a restart). */
export async function startRig(
  dir: string,
  o: { config?: Partial<FleetConfig>; fake?: FakeFleet; now?: () => number; soleSender?: boolean; store?: Store; grants?: KeyGrants } = {},
): Promise<Rig> {
  const store = o.store ?? new SqliteStore(join(dir, 'voxgate.db'));
  const bus = o.fake?.bus ?? new EventBus({ bufferSize: 0 });
  const fake = o.fake ?? new FakeFleet(bus);
  const fleet = await startFleet(
    {
      store,
      bus,
      log: pino({ level: 'silent' }),
      port: { readyHere: fake.readyHere },
      selector: fake.selector,
      soleSender: o.soleSender ?? true,
      maxCallMs: 300_000,
      ...(o.now ? { now: o.now } : {}),
      ...(o.grants ? { grants: o.grants } : {}),
    },
    fleetConfig(o.config),
  );
  return {
    dir,
    store,
    fleet,
    fake,
    stop: async () => {
      await fleet.close();
      await store.close();
    },
  };
}

export const mac = (n: number) => `02:00:${[(n >> 24) & 255, (n >> 16) & 255, (n >> 8) & 255, n & 255].map((b) => b.toString(16).padStart(2, '0')).join(':')}`;

export { GatewayError };

/**
 * The rigs and folders a test makes, torn down after each test: held answers released, each fleet and store
 * closed, each folder removed. `rig` starts and keeps one; `keep` keeps rigs started otherwise; `forget` lets
 * a test stop one itself (a restart).
 */
export function rigsPerTest(): { rig: typeof startRig; keep: (...r: Rig[]) => void; forget: (r: Rig) => void; dir: () => string } {
  const rigs: Rig[] = [];
  const dirs: string[] = [];
  afterEach(async () => {
    for (const r of rigs.splice(0)) {
      for (const d of r.fake.devices.values()) for (const answer of d.held.splice(0)) answer();
      await r.stop().catch(() => undefined);
    }
    for (const d of dirs.splice(0)) removeDir(d);
  });
  return {
    rig: async (...a) => {
      const r = await startRig(...a);
      rigs.push(r);
      return r;
    },
    keep: (...r) => rigs.push(...r),
    forget: (r) => {
      const i = rigs.indexOf(r);
      if (i >= 0) rigs.splice(i, 1);
    },
    dir: () => {
      const d = tempDir();
      dirs.push(d);
      return d;
    },
  };
}

/**
 * One store shared by several simulated instances, as the cluster's KV bucket is: each `view()` is one
 * instance's handle, told (a macrotask later, as a watch would) of what the other views wrote.
 */
export class SharedMemoryStore {
  readonly docs = new Map<string, string>();
  private readonly views = new Set<{ listeners: Map<string, Set<(c: StoreChange) => void>> }>();

  view(): Store {
    const me = { listeners: new Map<string, Set<(c: StoreChange) => void>>() };
    this.views.add(me);
    const k = (col: string, key: string) => `${col}\u0000${key}`;
    const tell = (col: string, key: string, value: unknown) => {
      for (const v of this.views)
        if (v !== me)
          for (const fn of v.listeners.get(col) ?? []) setImmediate(() => fn({ key, value: value === undefined ? undefined : structuredClone(value) }));
    };
    const put = async (col: string, key: string, value: unknown) => {
      this.docs.set(k(col, key), JSON.stringify(value));
      tell(col, key, value);
    };
    return {
      get: async (col, key) => {
        const v = this.docs.get(k(col, key));
        return v === undefined ? undefined : (JSON.parse(v) as unknown);
      },
      put,
      putMany: async (col, entries) => {
        for (const e of entries) await put(col, e.key, e.value);
      },
      create: async (col, key, value) => {
        if (this.docs.has(k(col, key))) return false;
        await put(col, key, value);
        return true;
      },
      delete: async (col, key) => {
        const had = this.docs.delete(k(col, key));
        if (had) tell(col, key, undefined);
        return had;
      },
      list: async (col) =>
        [...this.docs]
          .filter(([key]) => key.startsWith(`${col}\u0000`))
          .map(([key, v]) => ({ key: key.slice(col.length + 1), value: JSON.parse(v) as unknown })),
      onChange: (col, fn) => {
        let set = me.listeners.get(col);
        if (!set) me.listeners.set(col, (set = new Set()));
        set.add(fn);
        return () => void set.delete(fn);
      },
      close: async () => void this.views.delete(me),
    };
  }
}
