import { createServer, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import { Aedes, type Client } from 'aedes';
import { BufferListStream } from 'bl';
import { connectAsync, type MqttClient } from 'mqtt';
import { afterEach, describe, expect, it } from 'vitest';
import { leanParserBuffer } from '../../src/links/mqtt-parser-buffer.js';

const closers: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** A real aedes broker on 127.0.0.1, each client's parser given the lean list as the MQTT link does. */
async function broker(): Promise<{ port: number; clients: Client[]; swapped: boolean[] }> {
  const aedes = await Aedes.createBroker();
  const clients: Client[] = [];
  const swapped: boolean[] = [];
  const server: Server = createServer((socket: Socket) => {
    const client = aedes.handle(socket);
    clients.push(client);
    swapped.push(leanParserBuffer(client));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(() => new Promise((resolve) => aedes.close(() => server.close(resolve))));
  return { port: (server.address() as { port: number }).port, clients, swapped };
}

async function client(port: number): Promise<MqttClient> {
  const c = await connectAsync(`mqtt://127.0.0.1:${port}`, { reconnectPeriod: 0 });
  closers.push(() => c.endAsync(true));
  return c;
}

describe('leanParserBuffer', () => {
  it('gives the installed aedes client a plain list, which reads packets split across many socket chunks', async () => {
    const b = await broker();
    const sub = await client(b.port);
    const pub = await client(b.port);
    expect(b.swapped).toEqual([true, true]);
    for (const c of b.clients) {
      const list = (c as unknown as { _parser: { _list: unknown } })._parser._list;
      expect(list).not.toBeInstanceOf(BufferListStream);
      expect(typeof (list as { consume?: unknown }).consume).toBe('function');
    }
    await sub.subscribeAsync('t/#');
    // Large enough to arrive in several reads, then many small packets in one read: both pass through the lean list.
    const big = Buffer.alloc(300_000, 7);
    big.write('head');
    const got: Array<{ topic: string; payload: Buffer }> = [];
    const all = new Promise<void>((resolve) =>
      sub.on('message', (topic, payload) => {
        got.push({ topic, payload });
        if (got.length === 51) resolve();
      }),
    );
    await pub.publishAsync('t/big', big);
    for (let i = 0; i < 50; i++) pub.publish(`t/${i}`, `m${i}`);
    await all;
    expect(got[0]!.topic).toBe('t/big');
    expect(got[0]!.payload.equals(big)).toBe(true);
    expect(got.slice(1).map((m) => `${m.topic}=${m.payload.toString()}`)).toEqual(Array.from({ length: 50 }, (_, i) => `t/${i}=m${i}`));
  });

  it('leaves a client alone when its parser is not where it expects, or already holds bytes', () => {
    expect(leanParserBuffer({} as Client)).toBe(false);
    expect(leanParserBuffer({ _parser: { _list: [] } } as unknown as Client)).toBe(false);
    const holding = new BufferListStream();
    holding.append(Buffer.from([0x10]));
    const c = { _parser: { _list: holding } } as unknown as Client;
    expect(leanParserBuffer(c)).toBe(false);
    expect((c as unknown as { _parser: { _list: unknown } })._parser._list).toBe(holding);
  });
});
