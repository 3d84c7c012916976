import { OtaResponseSchema } from '@voxgate/protocol';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { once } from '../../../test/support/wait.js';
import { type ConfigError, loadConfig, type ConfigInput } from '../../src/config.js';
import { deviceFacts, pickRollout, rolloutBucket } from '../../src/firmware/rollout.js';

const mac = (i: number) =>
  `02:00:00:${((i >> 16) & 0xff).toString(16).padStart(2, '0')}:${((i >> 8) & 0xff).toString(16).padStart(2, '0')}:${(i & 0xff).toString(16).padStart(2, '0')}`;
const FLEET = Array.from({ length: 4000 }, (_, i) => mac(i));
const facts = { version: '1.0.0', boards: ['voxgate-devkit'] };
const rollout = (over: Record<string, unknown> = {}) => ({ version: '1.1.0', url: 'fw.bin', percent: 10, ...over });

describe('rollout selection', () => {
  it('takes a stable share of the fleet that only grows with the percentage', () => {
    for (const id of FLEET.slice(0, 50)) {
      const b = rolloutBucket(id);
      expect(b).toBe(rolloutBucket(id));
      expect(b).toBeGreaterThanOrEqual(0);
      expect(b).toBeLessThan(100);
    }
    const at10 = new Set(FLEET.filter((id) => pickRollout([rollout({ percent: 10 })], id, facts)));
    const at25 = new Set(FLEET.filter((id) => pickRollout([rollout({ percent: 25 })], id, facts)));
    // A hash of the id spreads the fleet: about 10 % and 25 % (4000 fixed ids, so this never flakes).
    expect(at10.size).toBeGreaterThan(320);
    expect(at10.size).toBeLessThan(480);
    expect(at25.size).toBeGreaterThan(880);
    expect(at25.size).toBeLessThan(1120);
    for (const id of at10) expect(at25.has(id)).toBe(true);
    expect(FLEET.filter((id) => pickRollout([rollout({ percent: 0 })], id, facts))).toEqual([]);
    expect(FLEET.filter((id) => pickRollout([rollout({ percent: 100 })], id, facts)).length).toBe(FLEET.length);
  });

  it('always includes listed devices, and only matching boards when boards are given', () => {
    const outside = FLEET.find((id) => rolloutBucket(id) >= 50)!;
    expect(pickRollout([rollout({ percent: 0, devices: [outside] })], outside, facts)?.version).toBe('1.1.0');
    expect(pickRollout([rollout({ percent: 100, boards: ['other-board'] })], outside, facts)).toBeUndefined();
    const perBoard = [
      rollout({ version: '2.0.0', percent: 100, boards: ['other-board'] }),
      rollout({ version: '1.1.0', percent: 100, boards: ['voxgate-devkit'] }),
    ];
    expect(pickRollout(perBoard, outside, facts)?.version).toBe('1.1.0');
    expect(pickRollout(perBoard, outside, { version: undefined, boards: ['other-board'] })?.version).toBe('2.0.0');
  });

  it('reads the version and board from the OTA body and the User-Agent, ignoring junk', () => {
    expect(deviceFacts('voxgate-devkit/1.0.0', {})).toEqual({ version: '1.0.0', boards: ['voxgate-devkit'] });
    expect(deviceFacts('bread-compact-wifi/1.7.6', { application: { version: '1.7.7' }, board: { type: 'bread-compact-wifi', name: 'x' } })).toEqual({
      version: '1.7.7',
      boards: ['bread-compact-wifi', 'x'],
    });
    expect(deviceFacts(undefined, { application: { version: 'v'.repeat(10_000) }, board: { type: ['a'] } })).toEqual({ version: undefined, boards: [] });
    expect(deviceFacts('Mozilla/5.0 (X11)', [1, 2])).toEqual({ version: '5.0', boards: ['Mozilla'] });
    expect(deviceFacts('../../etc', null)).toEqual({ version: undefined, boards: [] });
  });
});

describe('ota.rollout configuration', () => {
  const emptyFile = join(mkdtempSync(join(tmpdir(), 'voxgate-cfg-')), 'gateway.config.json');
  writeFileSync(emptyFile, '{}');
  afterAll(() => rmSync(dirname(emptyFile), { recursive: true, force: true }));
  const load = (env: Record<string, string>, over: ConfigInput = {}) => loadConfig({ GATEWAY_CONFIG: emptyFile, ...env }, over);

  it('comes from GATEWAY_OTA_ROLLOUT_* or the file, and is validated', () => {
    const c = load({
      GATEWAY_OTA_ROLLOUT_VERSION: '1.4.0',
      GATEWAY_OTA_ROLLOUT_URL: 'devkit-1.4.0.bin',
      GATEWAY_OTA_ROLLOUT_PERCENT: '12.5',
      GATEWAY_OTA_ROLLOUT_DEVICES: 'AA_BB_CC_DD_EE_01, aabbccddee02',
      GATEWAY_OTA_ROLLOUT_BOARDS: 'voxgate-devkit',
    });
    expect(c.ota.rollout).toEqual([
      { version: '1.4.0', url: 'devkit-1.4.0.bin', percent: 12.5, devices: ['aa:bb:cc:dd:ee:01', 'aa:bb:cc:dd:ee:02'], boards: ['voxgate-devkit'] },
    ]);
    const list = load({}, { ota: { rollout: [rollout(), rollout({ url: 'https://cdn.example.com/fw.bin', sha256: 'A'.repeat(64), size: 10 })] } });
    expect(list.ota.rollout?.map((r) => r.url)).toEqual(['fw.bin', 'https://cdn.example.com/fw.bin']);

    const problems = (over: ConfigInput) => {
      try {
        load({}, over);
      } catch (e) {
        return (e as ConfigError).problems.join('\n');
      }
      return '';
    };
    expect(problems({ ota: { rollout: rollout({ url: '../data/secrets.json' }) } })).toMatch(/ota\.rollout/);
    expect(problems({ ota: { rollout: rollout({ version: 'latest' }) } })).toMatch(/semantic version/);
    expect(problems({ ota: { rollout: rollout({ percent: 101 }) } })).toMatch(/ota\.rollout/);
    expect(problems({ ota: { rollout: rollout({ devices: ['not-a-mac'] }) } })).toMatch(/MAC/);
    expect(() => load({ GATEWAY_OTA_ROLLOUT_VERSION: '1.4.0', GATEWAY_OTA_ROLLOUT_URL: 'a.bin', GATEWAY_OTA_ROLLOUT_PERCENT: 'half' })).toThrow(
      /GATEWAY_OTA_ROLLOUT_PERCENT/,
    );
  });
});

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

describe('GET /firmware/{file}', () => {
  it('serves an image with its length and digest, and nothing outside the directory', async () => {
    const g = await gatewayWithImages({ 'devkit-1.1.0.bin': IMAGE }, {});
    try {
      writeFileSync(join(g.dir, '..', 'outside.bin'), 'secret');
      const res = await fetch(`${g.t.baseUrl}/firmware/devkit-1.1.0.bin`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-length')).toBe(String(IMAGE.length));
      expect(res.headers.get('repr-digest')).toBe(`sha-256=:${Buffer.from(IMAGE_SHA, 'hex').toString('base64')}:`);
      expect(Buffer.from(await res.arrayBuffer()).equals(IMAGE)).toBe(true);
      const head = await fetch(`${g.t.baseUrl}/firmware/devkit-1.1.0.bin`, { method: 'HEAD' });
      expect([head.status, head.headers.get('content-length')]).toEqual([200, String(IMAGE.length)]);

      for (const path of ['..%2Foutside.bin', '%2E%2E%2Foutside.bin', '.hidden', 'a%5Cb.bin', 'x'.repeat(200)]) {
        const r = await fetch(`${g.t.baseUrl}/firmware/${path}`);
        expect([r.status, path]).toEqual([400, path]);
        expect(r.headers.get('content-type')).toContain('application/problem+json');
        expect(((await r.json()) as { code: string }).code).toBe('INVALID_REQUEST');
      }
      mkdirSync(join(g.dir, 'subdir'));
      for (const name of ['missing.bin', 'subdir']) {
        const r = await fetch(`${g.t.baseUrl}/firmware/${name}`);
        expect(r.status).toBe(404);
        expect(((await r.json()) as { code: string }).code).toBe('NOT_FOUND');
      }
      expect(await g.t.metric('voxgate_firmware_downloads_total', { outcome: 'served' })).toBe(1);
      expect(await g.t.metric('voxgate_firmware_downloads_total', { outcome: 'bad_name' })).toBeGreaterThanOrEqual(1);
    } finally {
      await g.close();
    }
  });
});

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

  it('offers nothing from a rollout whose image is missing, and says so in the log', async () => {
    const g = await gatewayWithImages({}, { rollout: { version: '1.1.0', url: 'missing-1.1.0.bin', percent: 100 } });
    try {
      expect(await ota(g.t, FLEET[0]!, {})).toEqual({ version: '0.0.0', url: '' });
      expect(g.t.logs.some((l) => l['msg'] === 'firmware image missing: not offered' && l['file'] === 'missing-1.1.0.bin')).toBe(true);
    } finally {
      await g.close();
    }
  });

  it('passes force on as 1, and a configured digest for an external URL', async () => {
    const g = await gatewayWithImages(
      {},
      { rollout: { version: '0.9.0', url: 'https://cdn.example.com/0.9.0.bin', percent: 100, force: true, sha256: 'AB'.repeat(32), size: 1000 } },
    );
    try {
      expect(await ota(g.t, FLEET[1]!, {})).toEqual({
        version: '0.9.0',
        url: 'https://cdn.example.com/0.9.0.bin',
        force: 1,
        size: 1000,
        sha256: 'ab'.repeat(32),
      });
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

describe('GET /v1/devices/{id}/firmware', () => {
  it('says what the next OTA check would offer and why, without counting or remembering anything', async () => {
    const inside = FLEET.find((id) => rolloutBucket(id) < 30)!;
    const listed = FLEET.find((id) => rolloutBucket(id) >= 30)!;
    const g = await gatewayWithImages(
      { 'devkit-1.1.0.bin': IMAGE },
      {
        firmwareVersion: '1.0.5',
        firmwareUrl: 'https://fw.example.com/1.0.5.bin',
        rollout: { version: '1.1.0', url: 'devkit-1.1.0.bin', percent: 30, devices: [listed], boards: ['voxgate-devkit'] },
      },
    );
    const preview = async (id: string) => g.t.api<Record<string, unknown>>('GET', `/v1/devices/${id}/firmware`);
    try {
      // Never checked in: its board is unknown, so a board-limited rollout does not cover it yet.
      expect((await preview(inside)).body).toEqual({
        deviceId: inside,
        reported: null,
        source: 'baseline',
        offer: { version: '1.0.5', url: 'https://fw.example.com/1.0.5.bin' },
        rollout: null,
      });
      const offered = await ota(g.t, inside, { application: { version: '1.0.0' }, board: { type: 'voxgate-devkit', name: 'not-in-any-rollout' } });
      const after = await preview(inside.replaceAll(':', '_').toUpperCase());
      expect(after.status).toBe(200);
      expect(after.body).toEqual({
        deviceId: inside,
        reported: { version: '1.0.0', boards: ['voxgate-devkit'] },
        source: 'rollout',
        offer: offered,
        rollout: { version: '1.1.0', percent: 30, listed: false, bucket: rolloutBucket(inside) },
      });
      await ota(g.t, listed, {}, 'voxgate-devkit/1.0.0');
      expect((await preview(listed)).body['rollout']).toEqual({ version: '1.1.0', percent: 30, listed: true, bucket: rolloutBucket(listed) });
      // Only the two OTA checks were counted; the previews were not.
      expect(await g.t.metric('voxgate_firmware_offers_total')).toBe(2);

      expect((await g.t.api<{ code: string }>('GET', '/v1/devices/not-a-mac/firmware')).body.code).toBe('INVALID_REQUEST');
      expect((await g.t.api('GET', `/v1/devices/${inside}/firmware`, undefined, { apiKey: null })).status).toBe(401);
    } finally {
      await g.close();
    }
  });

  it('answers none, and logs nothing, when the configured image is missing', async () => {
    const g = await gatewayWithImages({}, { rollout: { version: '1.1.0', url: 'missing-1.1.0.bin', percent: 100 } });
    try {
      const r = await g.t.api<Record<string, unknown>>('GET', `/v1/devices/${FLEET[5]!}/firmware`);
      expect(r.body).toMatchObject({ source: 'none', offer: { version: '0.0.0', url: '' }, rollout: null });
      expect(g.t.logs.some((l) => l['msg'] === 'firmware image missing: not offered')).toBe(false);
    } finally {
      await g.close();
    }
  });
});
