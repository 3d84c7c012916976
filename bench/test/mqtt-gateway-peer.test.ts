/**
 * The MQTT+UDP voice rows' peer launcher (bench/lib/mqtt-gateway-peer.ts) on a stand-in checkout: a real child process
 * laid out as 78/xiaozhi-mqtt-gateway is (app.js reading config/mqtt.json beside it, MQTT_PORT, UDP_PORT, PUBLIC_IP),
 * so the test needs nothing from the network. The stand-in tells each TCP client what it was started with.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { count } from '../scenarios/measure.js';
import { MQTT_GATEWAY_PEER_ENV, mqttGatewayPeerDir, startMqttGatewayPeer } from '../lib/mqtt-gateway-peer.js';

/** Answers every connection with its config and environment as JSON, then holds the socket open until the client ends. */
const APP = `const { readFileSync } = require('node:fs');
const { join } = require('node:path');
const config = JSON.parse(readFileSync(join(__dirname, 'config', 'mqtt.json'), 'utf8'));
const seen = { config, udpPort: process.env.UDP_PORT, publicIp: process.env.PUBLIC_IP, signatureKey: process.env.MQTT_SIGNATURE_KEY ?? null };
require('node:net').createServer((s) => { s.on('error', () => {}); s.write(JSON.stringify(seen) + '\\n'); }).listen(Number(process.env.MQTT_PORT));
`;

describe('the MQTT gateway peer launcher', () => {
  const root = mkdtempSync(join(tmpdir(), 'voxgate-bench-mqtt-peer-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const checkout = (name: string, files: Record<string, string>) => {
    const dir = join(root, name);
    for (const [f, text] of Object.entries(files)) {
      mkdirSync(join(dir, f, '..'), { recursive: true });
      writeFileSync(join(dir, f), text);
    }
    return dir;
  };

  it('names the missing option, or what a checkout lacks', () => {
    const saved = process.env[MQTT_GATEWAY_PEER_ENV];
    delete process.env[MQTT_GATEWAY_PEER_ENV];
    try {
      expect(mqttGatewayPeerDir(undefined)).toEqual({ note: expect.stringContaining('--mqtt-gateway-peer <dir>') });
      const partial = checkout('partial', { 'app.js': '' });
      const got = mqttGatewayPeerDir(partial);
      expect(got.dir).toBeUndefined();
      expect(got.note).toContain('mqtt-protocol.js, utils/config-manager.js, node_modules/ws/package.json');
      process.env[MQTT_GATEWAY_PEER_ENV] = partial;
      expect(mqttGatewayPeerDir(undefined).note).toContain(partial);
    } finally {
      if (saved === undefined) delete process.env[MQTT_GATEWAY_PEER_ENV];
      else process.env[MQTT_GATEWAY_PEER_ENV] = saved;
    }
  });

  it('starts a copy configured for the voice server, leaving the checkout as it was', { timeout: 120_000 }, async () => {
    const own = '{"production":{"chat_servers":["ws://somewhere-else:8000"]},"debug":true}';
    const dir = checkout('peer', {
      'app.js': APP,
      'mqtt-protocol.js': '',
      'utils/config-manager.js': '',
      'node_modules/ws/package.json': '{}',
      'config/mqtt.json': own,
    });
    expect(mqttGatewayPeerDir(dir)).toEqual({ dir });
    process.env['MQTT_SIGNATURE_KEY'] = 'from-the-bench-shell';
    const run = join(root, 'run');
    mkdirSync(run);
    const peer = await startMqttGatewayPeer(dir, 'ws://127.0.0.1:9/xiaozhi/v1/', run).finally(() => delete process.env['MQTT_SIGNATURE_KEY']);
    try {
      const port = Number(new URL(peer.url).port);
      const socket = connect(port, '127.0.0.1');
      const line = await new Promise<string>((resolve, reject) => {
        let text = '';
        socket.on('data', (c: Buffer) => {
          text += c.toString();
          if (text.includes('\n')) resolve(text.trim());
        });
        socket.once('error', reject);
      });
      expect(JSON.parse(line)).toEqual({
        config: { production: { chat_servers: ['ws://127.0.0.1:9/xiaozhi/v1/'] }, debug: false },
        udpPort: expect.stringMatching(/^\d+$/),
        publicIp: '127.0.0.1',
        signatureKey: null,
      });
      // The probe counts the open socket (the peer's sessions), and nothing once it has gone. The launcher's own
      // readiness probe closes on its own time: wait for the count to come down to ours.
      let n = await count(peer.proc);
      while (n > 1) n = await new Promise<number>((r) => setTimeout(() => void count(peer.proc).then(r), 20));
      expect(n).toBe(1);
      socket.destroy();
      for (let n = 1; n > 0; n = await count(peer.proc)) await new Promise((r) => setTimeout(r, 20));
      expect(readFileSync(join(dir, 'config', 'mqtt.json'), 'utf8')).toBe(own);
    } finally {
      await peer.proc.stop();
    }
  });
});
