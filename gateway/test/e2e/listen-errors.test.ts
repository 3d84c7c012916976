import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway } from '../../../test/support/gateway-harness.js';

/** A port held by another listener on 127.0.0.1 (port 0: the OS picks it). */
async function holdPort(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as { port: number }).port };
}

describe('a start whose ports are taken says which (issue 9 item 20)', () => {
  const held: Server[] = [];
  let httpPort = 0;
  let mqttPort = 0;
  beforeAll(async () => {
    const a = await holdPort();
    const b = await holdPort();
    held.push(a.server, b.server);
    [httpPort, mqttPort] = [a.port, b.port];
  });
  afterAll(() => Promise.all(held.map((s) => new Promise((resolve) => s.close(resolve)))));

  it('reports both the HTTP and the MQTT port when both are in use', async () => {
    const start = startTestGateway({ http: { port: httpPort }, mqtt: { port: mqttPort } });
    await expect(start).rejects.toThrow(`HTTP 127.0.0.1:${httpPort} is already in use (EADDRINUSE)`);
    await expect(start).rejects.toThrow(`MQTT 127.0.0.1:${mqttPort} is already in use (EADDRINUSE)`);
  });

  it('reports the one port that is in use, and frees the other', async () => {
    await expect(startTestGateway({ http: { port: httpPort } })).rejects.toThrow(/^cannot listen: HTTP 127\.0\.0\.1:\d+ is already in use \(EADDRINUSE\)$/);
    await expect(startTestGateway({ mqtt: { port: mqttPort } })).rejects.toThrow(/^cannot listen: MQTT 127\.0\.0\.1:\d+ is already in use \(EADDRINUSE\)$/);
  });
});
