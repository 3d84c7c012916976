import { connect, createServer, type Server, type Socket } from 'node:net';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { metricValue } from '../../../test/support/device-parts.js';
import { limitConnections } from '../../src/links/connection-limits.js';
import { sourceKey } from '../../src/throttle/source-key.js';
import { createMetrics, type Metrics } from '../../src/metrics.js';

describe('sourceKey', () => {
  it('groups IPv6 sources by /64 and maps IPv4-mapped addresses to IPv4', () => {
    expect(sourceKey('2001:db8:1:2:aaaa::1')).toBe(sourceKey('2001:db8:1:2:bbbb::9'));
    expect(sourceKey('2001:db8:1:2::1')).not.toBe(sourceKey('2001:db8:1:3::1'));
    expect(sourceKey('::ffff:10.0.0.7')).toBe('10.0.0.7');
    expect(sourceKey('10.0.0.7')).not.toBe(sourceKey('10.0.0.8'));
  });

  it('keeps what is not an address as it is, and names a missing one', () => {
    expect(sourceKey(undefined)).toBe('unknown');
    expect(sourceKey('not-an-ip')).toBe('not-an-ip');
  });

  it('answers the same for an address asked again, right after it or after another (its last answer is kept)', () => {
    const seq = ['10.0.0.7', '10.0.0.7', '::ffff:10.0.0.9', '::ffff:10.0.0.9', '2001:db8:1:2::1', '10.0.0.7', '2001:db8:1:2::1'];
    expect(seq.map(sourceKey)).toEqual(['10.0.0.7', '10.0.0.7', '10.0.0.9', '10.0.0.9', '2001:db8:1:2::/64', '10.0.0.7', '2001:db8:1:2::/64']);
  });
});

/** Open sockets that read and wait; `closed` settles when the listener ends one. */
function dial(port: number, localAddress = '127.0.0.1') {
  const socket = connect({ port, host: '127.0.0.1', localAddress });
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.resume();
  return { socket, closed };
}

describe('limitConnections', () => {
  const cleanup: Array<() => unknown> = [];
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });

  /** A plain listener capped as the links cap theirs; `accepted` holds the sockets its own handler saw. */
  async function listener(limits: { maxConnections: number; maxConnectionsPerAddress: number }, metrics: Metrics = createMetrics()) {
    const accepted: Socket[] = [];
    const server: Server = createServer((s) => {
      if (!s.destroyed) accepted.push(s);
    });
    limitConnections(server, 'mqtt', limits, metrics, pino({ level: 'silent' }));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanup.push(() => new Promise((resolve) => server.close(resolve)));
    cleanup.push(() => accepted.forEach((s) => s.destroy()));
    return { server, accepted, metrics, port: (server.address() as { port: number }).port };
  }
  const open = (port: number, n: number, localAddress?: string) => {
    const sockets = Array.from({ length: n }, () => dial(port, localAddress));
    cleanup.push(() => sockets.forEach((s) => s.socket.destroy()));
    return sockets;
  };

  it("refuses sockets past one source's cap, counts them, and still accepts another source", async () => {
    const l = await listener({ maxConnections: 100, maxConnectionsPerAddress: 3 });
    const first = open(l.port, 5);
    await Promise.race([first[3]!.closed, first[4]!.closed]);
    await expect.poll(() => metricValue(l.metrics, 'voxgate_connections_refused_total', { listener: 'mqtt', reason: 'address_full' })).toBe(2);
    expect(await metricValue(l.metrics, 'voxgate_connections_open', { listener: 'mqtt' })).toBe(3);
    open(l.port, 1, '127.0.0.2');
    await expect.poll(() => metricValue(l.metrics, 'voxgate_connections_open', { listener: 'mqtt' })).toBe(4);
  });

  it("frees a source's place when one of its sockets closes", async () => {
    const l = await listener({ maxConnections: 100, maxConnectionsPerAddress: 1 });
    const [a] = open(l.port, 1);
    await expect.poll(() => l.accepted.length).toBe(1);
    a!.socket.destroy();
    await expect.poll(() => metricValue(l.metrics, 'voxgate_connections_open', { listener: 'mqtt' })).toBe(0);
    open(l.port, 1);
    await expect.poll(() => l.accepted.length).toBe(2);
    expect(await metricValue(l.metrics, 'voxgate_connections_refused_total', { listener: 'mqtt', reason: 'address_full' })).toBe(0);
  });

  it('shares one cap between several servers: a second port is no second quota', async () => {
    const metrics = createMetrics();
    const servers = [createServer(), createServer()];
    const kept: Socket[] = [];
    for (const s of servers) s.on('connection', (sock: Socket) => void (sock.destroyed || kept.push(sock)));
    limitConnections(servers, 'mqtt', { maxConnections: 2, maxConnectionsPerAddress: 100 }, metrics, pino({ level: 'silent' }));
    const ports: number[] = [];
    for (const s of servers) {
      await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
      ports.push((s.address() as { port: number }).port);
      cleanup.push(() => new Promise((resolve) => s.close(resolve)));
    }
    cleanup.push(() => kept.forEach((s) => s.destroy()));
    open(ports[0]!, 2);
    await expect.poll(() => kept.length).toBe(2);
    const [late] = open(ports[1]!, 1);
    await late!.closed;
    expect(kept).toHaveLength(2);
    expect(await metricValue(metrics, 'voxgate_connections_refused_total', { listener: 'mqtt', reason: 'listener_full' })).toBe(1);
  });
});
