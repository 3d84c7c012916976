import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveForwardedCalls } from '../../src/cluster/call-server.js';
import { Forwarder } from '../../src/cluster/forwarder.js';
import { createClusterMetrics } from '../../src/cluster/metrics.js';
import { callSubject } from '../../src/cluster/wire.js';
import type { DeviceRegistry } from '../../src/devices/registry.js';
import { GatewayError } from '../../src/errors.js';
import { startNatsServer, type NatsServer } from '../../../test/support/nats-server.js';
import { silentLog } from '../../../test/support/device-parts.js';

/**
 * The cluster's call forwarding as parts over a real nats-server: a Forwarder on one connection, the call
 * server of the owning instance on another, a registry that holds one fake device. No gateway.
 */
describe('forwarded calls between instances (forwarder and call server)', () => {
  let nats: NatsServer;
  const conns: NatsConnection[] = [];
  const open = async () => {
    const nc = await connect({ servers: nats.url });
    conns.push(nc);
    return nc;
  };
  beforeAll(async () => {
    nats = await startNatsServer();
  });
  afterAll(async () => {
    await Promise.all(conns.map((c) => c.close().catch(() => undefined)));
    await nats?.stop();
  });

  /** A registry holding one device whose `call` does what the test says. */
  function registryWith(deviceId: string, call: (name: string, args: Record<string, unknown>) => Promise<unknown>): DeviceRegistry {
    const handle = { call, rpc: async () => ({ ok: true }), notify: () => undefined };
    return { find: (id: string) => (id === deviceId ? handle : undefined) } as unknown as DeviceRegistry;
  }

  it("answers a forwarded call from the owner, and keeps the owner's error codes", async () => {
    const [owner, caller] = [await open(), await open()];
    const metrics = createClusterMetrics(new Registry());
    const refused: string[] = [];
    const sub = serveForwardedCalls({
      nc: owner,
      instanceId: 'gw-owner',
      metrics,
      maxMessageBytes: 64 * 1024,
      log: silentLog,
      refused: (_o, m) => refused.push(m),
      registry: registryWith('02:00:00:00:00:01', async (name, args) => {
        if (name === 'self.fail') throw new GatewayError('INVALID_ARGUMENTS', 'volume must be 0..100');
        return { content: [{ type: 'text', text: JSON.stringify(args) }], isError: false, durationMs: 3 };
      }),
    });
    // The owner's subscription must reach the server before the caller asks (else: no responders, offline).
    await owner.flush();
    const f = new Forwarder({ nc: caller, metrics: createClusterMetrics(new Registry()), maxMessageBytes: 64 * 1024, dead: () => undefined });
    try {
      const ok = await f.forward('gw-owner', { op: 'call', deviceId: '02:00:00:00:00:01', name: 'self.set', args: { volume: 4 } }, 2000);
      expect(ok).toMatchObject({ content: [{ text: '{"volume":4}' }], durationMs: 3 });
      const failed = f.forward('gw-owner', { op: 'call', deviceId: '02:00:00:00:00:01', name: 'self.fail', args: {} }, 2000);
      await expect(failed).rejects.toMatchObject({ code: 'INVALID_ARGUMENTS', message: 'volume must be 0..100' });
      // A device the owner does not hold (any more) is offline, as seen from the caller.
      await expect(f.forward('gw-owner', { op: 'call', deviceId: '02:00:00:00:00:09', name: 'x', args: {} }, 2000)).rejects.toMatchObject({
        code: 'DEVICE_OFFLINE',
      });
      // Junk on the owner's subject is refused with a clear answer, and logged (throttled by the caller).
      const junk = await caller.request(callSubject('gw-owner'), '{"op":"call"}', { timeout: 2000 }).catch((e: unknown) => e);
      expect(JSON.parse(new TextDecoder().decode((junk as { data: Uint8Array }).data))).toMatchObject({ ok: false, code: 'INVALID_REQUEST' });
      expect(refused).toHaveLength(1);
    } finally {
      f.close();
      sub.unsubscribe();
    }
  });

  it('fails a waiting call with DEVICE_OFFLINE as soon as the owner stops listening, and tells presence', async () => {
    const [owner, caller] = [await open(), await open()];
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let reached!: () => void;
    const atOwner = new Promise<void>((r) => (reached = r));
    const sub = serveForwardedCalls({
      nc: owner,
      instanceId: 'gw-gone',
      metrics: createClusterMetrics(new Registry()),
      maxMessageBytes: 64 * 1024,
      log: silentLog,
      refused: () => undefined,
      registry: registryWith('02:00:00:00:00:02', () => (reached(), held.then(() => ({ content: [], isError: false })))),
    });
    await owner.flush();
    const dead: string[] = [];
    const f = new Forwarder({ nc: caller, metrics: createClusterMetrics(new Registry()), maxMessageBytes: 64 * 1024, dead: (o) => dead.push(o) });
    try {
      const pending = f.forward('gw-gone', { op: 'call', deviceId: '02:00:00:00:00:02', name: 'self.slow', args: {} }, 60_000);
      // The owner's process is gone: its connection closes, nobody listens on its subject any more.
      await atOwner;
      await owner.close();
      await expect(pending).rejects.toMatchObject({ code: 'DEVICE_OFFLINE' });
      expect(dead).toContain('gw-gone');
    } finally {
      release();
      f.close();
      sub.unsubscribe();
    }
  });

  it('fails forwarded calls at once while this instance has lost NATS', async () => {
    const caller = await open();
    const f = new Forwarder({ nc: caller, metrics: createClusterMetrics(new Registry()), maxMessageBytes: 64 * 1024, dead: () => undefined });
    f.disconnected();
    await expect(f.forward('gw-any', { op: 'rpc', deviceId: '02:00:00:00:00:03', name: 'ping' }, 1000)).rejects.toMatchObject({
      code: 'DEVICE_OFFLINE',
      message: expect.stringContaining('lost its NATS connection'),
    });
    f.reconnected();
    f.close();
  });
});
