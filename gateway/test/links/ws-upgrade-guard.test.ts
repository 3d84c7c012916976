/** A throw inside the device WebSocket's upgrade ends that connection only: counted, logged, the server keeps serving. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { metricValue, registryPart, silentLog } from '../../../test/support/device-parts.js';
import type { DeviceRegistry } from '../../src/devices/registry.js';
import { clientAddressOf } from '../../src/links/client-address.js';
import { attachWebSocketLink } from '../../src/links/ws.js';

let server: Server | undefined;
afterEach(() => new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined))));

/** How the connection went: its close code once the server cut it, or 'open' while it stays (a ping answered). */
function outcome(url: string): Promise<string> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { headers: { 'Device-Id': '02:00:00:00:bb:01' } });
    ws.once('close', (code) => resolve(`closed ${code}`));
    ws.once('error', () => undefined);
    // The 101 goes out before the registry is asked: open, then cut. A live connection answers a ping.
    ws.once('open', () => ws.ping());
    ws.once('pong', () => (ws.terminate(), resolve('open')));
  });
}

describe('the device WebSocket upgrade guard', () => {
  it('cuts the connection whose upgrade threw, counts it, and goes on answering', async () => {
    const { registry, metrics } = registryPart();
    let failing = true;
    const connect = registry.connect.bind(registry);
    const flaky = Object.assign(Object.create(registry) as DeviceRegistry, {
      connect: (...a: Parameters<DeviceRegistry['connect']>) => {
        if (failing) throw new Error('registry failed');
        return connect(...a);
      },
    });
    server = createServer((_req, res) => res.writeHead(404).end());
    const link = attachWebSocketLink(server, {
      path: '/xiaozhi/v1/',
      maxPayloadBytes: 64 * 1024,
      heartbeatMs: 60_000,
      maxUnreadBytes: 4 * 1024 * 1024,
      maxConnections: 10,
      auth: { mode: 'open', tokens: [], secret: 'device-secret-0123456789', tokenMaxAgeSeconds: 3600 },
      registry: flaky,
      addressOf: clientAddressOf([]),
      log: silentLog,
      metrics,
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/xiaozhi/v1/`;
    try {
      expect(await outcome(url)).toBe('closed 1006');
      expect(await metricValue(metrics, 'voxgate_frame_handler_errors_total', { transport: 'websocket' })).toBe(1);
      failing = false;
      expect(await outcome(url)).toBe('open');
    } finally {
      link.close(1001, 'test over');
    }
  });
});
