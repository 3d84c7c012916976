import { OtaResponseSchema } from '@voxgate/protocol';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { once } from '../../../test/support/wait.js';
import type { ConfigInput } from '../../src/config.js';
import { rolloutBucket } from '../../src/firmware/rollout.js';

const mac = (i: number) =>
  `02:00:00:${((i >> 16) & 0xff).toString(16).padStart(2, '0')}:${((i >> 8) & 0xff).toString(16).padStart(2, '0')}:${(i & 0xff).toString(16).padStart(2, '0')}`;
const FLEET = Array.from({ length: 4000 }, (_, i) => mac(i));

/** The gateway with its own data dir holding <dataDir>/firmware. */
async function gatewayWithImages(
  images: Record<string, Buffer>,
  ota: ConfigInput['ota'],
): Promise<{ t: TestGateway; dir: string; close: () => Promise<void> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-fw-'));
  const dir = join(dataDir, 'firmware');
  mkdirSync(dir);
  for (const [name, bytes] of Object.entries(images)) writeFileSync(join(dir, name), bytes);
  const t = await startTestGateway({ dataDir, ota });
  return { t, dir, close: async () => (await t.close(), rmSync(dataDir, { recursive: true, force: true })) };
}

const IMAGE = Buffer.from(Array.from({ length: 300_000 }, (_, i) => (i * 7919) & 0xff));
const IMAGE_SHA = createHash('sha256').update(IMAGE).digest('hex');

async function ota(t: TestGateway, deviceId: string, body: unknown, userAgent = 'voxgate-devkit/1.0.0') {
  const res = await fetch(`${t.baseUrl}/xiaozhi/ota/`, {
    method: 'POST',
    headers: { 'device-id': deviceId, 'client-id': 'c0ffee00-0000-4000-8000-000000000001', 'user-agent': userAgent, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(200);
  return OtaResponseSchema.parse(await res.json()).firmware;
}

// Rollout selection, its configuration, GET /firmware/{file}, the offer's edge cases and the preview route are the
// parts' own (test/firmware/); here, the OTA route, the images and the device list wired together.
describe('the OTA answer offers each device its firmware', () => {
  it('offers the rollout to its share with the local URL, size and digest, the baseline to the rest', async () => {
    const inside = FLEET.find((id) => rolloutBucket(id) < 30)!;
    const outside = FLEET.find((id) => rolloutBucket(id) >= 30)!;
    const listed = FLEET.find((id) => rolloutBucket(id) >= 30 && id !== outside)!;
    const g = await gatewayWithImages(
      { 'devkit-1.1.0.bin': IMAGE },
      {
        firmwareVersion: '1.0.5',
        firmwareUrl: 'https://fw.example.com/1.0.5.bin',
        rollout: { version: '1.1.0', url: 'devkit-1.1.0.bin', percent: 30, devices: [listed], boards: ['voxgate-devkit'] },
      },
    );
    try {
      const offered = await ota(g.t, inside, { application: { version: '1.0.0' } });
      expect(offered).toEqual({ version: '1.1.0', url: `${g.t.baseUrl}/firmware/devkit-1.1.0.bin`, size: IMAGE.length, sha256: IMAGE_SHA });
      // The preview route reads what the OTA route heard (one firmware service behind both).
      const preview = await g.t.api<{ source: string; reported: unknown }>('GET', `/v1/devices/${inside}/firmware`);
      expect(preview.body).toMatchObject({ source: 'rollout', reported: { version: '1.0.0', boards: ['voxgate-devkit'] } });
      expect((await ota(g.t, listed, {})).version).toBe('1.1.0');
      expect(await ota(g.t, outside, {})).toEqual({ version: '1.0.5', url: 'https://fw.example.com/1.0.5.bin' });
      // Another board (body board.type and User-Agent both say so) is not in this rollout.
      expect((await ota(g.t, inside, { board: { type: 'bread-compact-wifi' } }, 'bread-compact-wifi/1.7.6')).version).toBe('1.0.5');
      // The image the device is told to fetch is the one served.
      const body = Buffer.from(await (await fetch(offered.url)).arrayBuffer());
      expect(createHash('sha256').update(body).digest('hex')).toBe(offered.sha256);
      expect(await g.t.metric('voxgate_firmware_offers_total', { source: 'rollout' })).toBe(2);
    } finally {
      await g.close();
    }
  });
});

describe('GET /v1/devices shows firmware versions', () => {
  it('from the device’s initialize answer, else from what it reported to the OTA endpoint', async () => {
    const g = await gatewayWithImages({}, {});
    const ready = FLEET[2]!;
    const pending = FLEET[3]!;
    try {
      // An OTA report naming someone else's device cannot override that device's own answer.
      await ota(g.t, ready, { application: { version: '6.6.6' } });
      const d = new ReferenceDevice({ deviceId: ready, firmwareVersion: '1.7.6' });
      const isReady = g.t.nextEvent('device.ready', ready);
      await d.connectWebSocket(g.t.wsUrl);
      await isReady;

      // A device that connected but has not answered initialize yet: its OTA report is all we know.
      await ota(g.t, pending, { application: { version: '1.0.3' } });
      const online = g.t.nextEvent('device.online', pending);
      const ws = new WebSocket(g.t.wsUrl, { headers: { 'device-id': pending, 'client-id': 'silent' } });
      await once(ws, 'open');
      await online;

      const list = await g.t.api<{ devices: Array<{ id: string; firmwareVersion: string | null }> }>('GET', '/v1/devices');
      const byId = Object.fromEntries(list.body.devices.map((x) => [x.id, x.firmwareVersion]));
      expect(byId).toEqual({ [ready]: '1.7.6', [pending]: '1.0.3' });
      expect((await g.t.api<{ firmwareVersion: string }>('GET', `/v1/devices/${ready}`)).body.firmwareVersion).toBe('1.7.6');
      ws.terminate();
      d.terminate();
    } finally {
      await g.close();
    }
  });
});

describe('DELETE /v1/devices/{id} forgets what the device reported to the OTA endpoint', () => {
  it('the report goes with the device, known or never connected; a report after the forget is the one shown', async () => {
    const g = await gatewayWithImages({}, {});
    const known = FLEET[5]!;
    const neverConnected = FLEET[6]!;
    const reported = async (id: string) => (await g.t.api<{ reported: { version: string | null } | null }>('GET', `/v1/devices/${id}/firmware`)).body.reported;
    try {
      // Connected under the client id its OTA check names, so the check speaks for it and is kept as a known device's.
      const online = g.t.nextEvent('device.online', known);
      const ws = new WebSocket(g.t.wsUrl, { headers: { 'device-id': known, 'client-id': 'c0ffee00-0000-4000-8000-000000000001' } });
      await once(ws, 'open');
      await online;
      await ota(g.t, known, { application: { version: '1.0.3' } });
      expect(await reported(known)).toEqual({ version: '1.0.3', boards: [] });
      expect((await g.t.api<{ firmwareVersion: string | null }>('GET', `/v1/devices/${known}`)).body.firmwareVersion).toBe('1.0.3');

      const closed = once(ws, 'close');
      expect((await g.t.api('DELETE', `/v1/devices/${known}`)).status).toBe(204);
      await closed;
      expect((await g.t.api('GET', `/v1/devices/${known}`)).status).toBe(404);
      expect(await reported(known)).toBeNull();
      // Its next check (now of an id the records do not know) is what the preview shows, not the forgotten one.
      await ota(g.t, known, { application: { version: '1.0.4' } });
      expect(await reported(known)).toEqual({ version: '1.0.4', boards: [] });

      // An id that checked in and never connected: nothing recorded (404), and its report goes all the same.
      await ota(g.t, neverConnected, { application: { version: '1.0.6' } });
      expect(await reported(neverConnected)).toEqual({ version: '1.0.6', boards: [] });
      expect((await g.t.api('DELETE', `/v1/devices/${neverConnected}`)).status).toBe(404);
      expect(await reported(neverConnected)).toBeNull();
    } finally {
      await g.close();
    }
  });
});
