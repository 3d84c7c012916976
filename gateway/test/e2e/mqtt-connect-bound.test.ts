import mqttPacket from 'mqtt-packet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_CONNECT_BYTES } from '../../src/links/mqtt-packet-guard.js';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { mqttFrame, RawMqtt } from '../../../test/support/raw-mqtt.js';
import { until, withTimeout } from '../../../test/support/wait.js';

/** A CONNECT's fixed header announcing `bytes` (16 KiB to 2 MiB: three bytes of length) of body, and none of the body. */
const connectHeader = (bytes: number): Buffer => mqttFrame(0x10, Buffer.alloc(bytes)).subarray(0, 4);

/**
 * The first packet on the MQTT port comes before any credentials (red team 11). It was held to the packet limit
 * (`mqtt.maxPacketBytes`, 256 KiB): a socket that announced a CONNECT of that size and sent all of it but its last byte
 * kept it buffered, with no credentials, until the connect deadline (10 s), and reconnected. 400 such sockets held 207 MB
 * of the gateway's memory; one address may open 1000 (`mqtt.maxConnectionsPerAddress`), the port 8000.
 */
describe('MQTT: a CONNECT is bounded before it is buffered', () => {
  let t: TestGateway;
  let port: number;

  beforeAll(async () => {
    // A deadline well past the refusal: a CONNECT left to it would be counted as no_connect, not too_large.
    t = await startTestGateway({ mqtt: { connectTimeoutMs: 20_000 } });
    port = Number(new URL(t.mqttUrl).port);
  });
  afterAll(() => t.close());

  const tooLarge = () => t.metric('voxgate_frames_rejected_total', { reason: 'too_large' });
  const noConnect = () => t.metric('voxgate_connections_refused_total', { reason: 'no_connect' });

  it('closes sockets announcing a CONNECT over MAX_CONNECT_BYTES once the length is read, holding none of it', async () => {
    const [largeBefore, idleBefore] = [await tooLarge(), await noConnect()];
    const openBefore = await t.metric('voxgate_connections_open', { listener: 'mqtt' });
    const clients = await Promise.all(Array.from({ length: 20 }, () => RawMqtt.open(port)));
    for (const c of clients) {
      // 200 KiB announced, 64 KiB of it sent: under the packet limit, never finished.
      c.sendBytes(connectHeader(200 * 1024));
      c.sendBytes(Buffer.alloc(64 * 1024, 0x41));
    }
    await Promise.all(clients.map((c) => withTimeout(c.closed.promise, 45_000, 'an oversized CONNECT to be closed')));
    for (const c of clients) {
      expect(c.endedByUs).toBe(false);
      expect(c.packets.size).toBe(0);
    }
    expect(await tooLarge()).toBe(largeBefore + 20);
    expect(await noConnect()).toBe(idleBefore);
    await until(async () => (await t.metric('voxgate_connections_open', { listener: 'mqtt' })) === openBefore, 'the sockets to be gone');
    expect(t.logs.some((l) => String(l['err']).includes(`exceeds the ${MAX_CONNECT_BYTES}-byte limit`))).toBe(true);
  });

  it('still answers CONNECTs under the bound, a backend with a will of a few KiB included; one byte over is closed', async () => {
    const backend = (willBytes: number) => ({
      clientId: `backend-${willBytes}`,
      username: 'b',
      password: Buffer.from(TEST_API_KEY),
      will: { topic: 'w', payload: Buffer.alloc(willBytes, 0x61), qos: 0 as const, retain: false },
    });
    const ok = await RawMqtt.connect(port, backend(12 * 1024));
    expect(ok.connack.returnCode).toBe(0);
    ok.c.destroy();
    const device = await RawMqtt.connect(port, { clientId: `GID_test@@@02_00_00_00_0e_01@@@${'u'.repeat(64)}` });
    expect(device.connack.returnCode).toBe(0);
    device.c.destroy();

    const largeBefore = await tooLarge();
    const over = await RawMqtt.open(port);
    // The CONNECT's size beside the will: sized so that the whole packet is MAX_CONNECT_BYTES + 1.
    const probe = { cmd: 'connect' as const, protocolId: 'MQTT' as const, protocolVersion: 4 as const, clean: true, keepalive: 60, ...backend(0) };
    const overhead = mqttPacket.generate(probe).length;
    over.send({ ...probe, will: { ...probe.will, payload: Buffer.alloc(MAX_CONNECT_BYTES + 1 - overhead - 1, 0x61) } });
    await withTimeout(over.closed.promise, 45_000, 'a CONNECT one byte over the bound to be closed');
    expect(over.packets.size).toBe(0);
    expect(await tooLarge()).toBe(largeBefore + 1);
  });
});
