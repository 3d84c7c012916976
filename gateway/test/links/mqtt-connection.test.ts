import { createServer, connect, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { GuardedMqttConnection } from '../../src/links/mqtt-connection.js';
import { MqttPacketGuard, PacketTooLargeError } from '../../src/links/mqtt-packet-guard.js';

/** A connected pair on 127.0.0.1: the server's socket (what the broker's connection wraps) and the peer's. */
async function socketPair(): Promise<{ server: Server; near: Socket; far: Socket }> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  const far = connect(port, '127.0.0.1');
  const [near] = (await once(server, 'connection')) as [Socket];
  await once(far, 'connect');
  return { server, near, far };
}

const servers: Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

async function setUp(limit = 1024) {
  const pair = await socketPair();
  servers.push(pair.server);
  const guard = new MqttPacketGuard(limit);
  const refused: Error[] = [];
  const conn = new GuardedMqttConnection(pair.near, guard, (err) => refused.push(err));
  return { ...pair, guard, conn, refused };
}

describe('GuardedMqttConnection', () => {
  it('writes a corked run of chunks (how aedes writes a packet) to the socket in one writev', async () => {
    const { near, far, conn } = await setUp();
    const writes: string[] = [];
    const socketWrite = near._write.bind(near);
    const socketWritev = near._writev!.bind(near);
    near._write = (chunk, enc, cb) => (writes.push('write'), socketWrite(chunk, enc, cb));
    near._writev = (chunks, cb) => (writes.push(`writev ${chunks.length}`), socketWritev(chunks, cb));
    const got: Buffer[] = [];
    far.on('data', (b: Buffer) => got.push(b));
    conn.cork();
    conn.write(Buffer.from([0x30]));
    conn.write(Buffer.from([0x0c]));
    conn.write(Buffer.from([0, 3]));
    conn.write('a/b');
    conn.write(Buffer.from('{"x":1}'));
    process.nextTick(() => conn.uncork());
    await new Promise<void>((resolve) => {
      const check = () => (Buffer.concat(got).length >= 14 ? resolve() : far.once('data', check));
      check();
    });
    expect(Buffer.concat(got)).toEqual(Buffer.concat([Buffer.from([0x30, 0x0c, 0, 3]), Buffer.from('a/b{"x":1}')]));
    expect(writes).toEqual(['writev 5']);
    conn.destroy();
  });

  it('reads what passed the guard, and ends when the peer ends', async () => {
    const { far, conn } = await setUp();
    const got: Buffer[] = [];
    conn.on('data', (b: Buffer) => got.push(b));
    const ended = once(conn, 'end');
    const pingreq = Buffer.from([0xc0, 0x00]);
    far.end(pingreq);
    await ended;
    expect(Buffer.concat(got)).toEqual(pingreq);
  });

  it("fails with the guard's verdict and closes the socket", async () => {
    const { near, far, conn, refused } = await setUp(64);
    const failed = once(conn, 'error');
    const closed = once(near, 'close');
    // A QoS 1 PUBLISH announcing 200 bytes: over the limit, and it would need an acknowledgement.
    far.write(Buffer.from([0x32, 200, 1]));
    const [err] = (await failed) as [Error];
    expect(err).toBeInstanceOf(PacketTooLargeError);
    // Its owner heard the verdict once, before the connection failed with it.
    expect(refused).toEqual([err]);
    await closed;
    expect(conn.destroyed).toBe(true);
  });

  it('is destroyed when its socket closes, and destroying it closes the socket', async () => {
    const a = await setUp();
    const closed = once(a.conn, 'close');
    a.far.destroy();
    await closed;
    expect(a.conn.destroyed).toBe(true);

    const b = await setUp();
    const farClosed = once(b.far, 'close');
    b.conn.destroy();
    await farClosed;
    expect(b.near.destroyed).toBe(true);
  });
});
