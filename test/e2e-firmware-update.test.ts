import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ConfigInput, GatewayEvent } from '../gateway/src/index.js';
import { DeviceSimProcess, type SimEvent } from './support/device-sim-process.js';
import { startTestGateway, type TestGateway } from './support/gateway-harness.js';

/**
 * Firmware update over the air, end to end on the host: the real gateway serves an image from
 * <dataDir>/firmware and offers it in the OTA answer (ota.rollout); the C++ simulator (firmware/host)
 * decides by semantic version, downloads it with the host OTA client (size + SHA-256 checked), reports
 * progress as `notifications/firmware_update`, switches slots, reboots, and keeps the new image only once
 * it answered the gateway's `initialize`, else rolls back. The device is enrolled (deviceAuth hmac): across the
 * reboot it keeps its credentials and presents them to the OTA endpoint, which hands them back only to it.
 */
const SECRET = 'e2e-firmware-secret-0123456789';
const IMAGE = randomBytes(256 * 1024);
const IMAGE_SHA = createHash('sha256').update(IMAGE).digest('hex');

type Progress = { state: string; version: string; percent?: number; error?: string };

describe.each(['websocket', 'mqtt'] as const)('firmware update over %s', (transport) => {
  const cleanup: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });
  const mac = transport === 'websocket' ? '02:00:00:00:f0:01' : '02:00:00:00:f1:01';
  const slotDir = (root: string) => join(root, mac.replace(/:/g, '_'));

  /**
   * A gateway whose data dir holds the image, offering it to `mac` only; progress notifications collected.
   * Enrollment `approve` (the hmac default) unless `open` is asked for.
   */
  const gateway = async (rollout: Record<string, unknown> = {}, policy: 'approve' | 'open' = 'approve') => {
    const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-fw-e2e-'));
    mkdirSync(join(dataDir, 'firmware'));
    writeFileSync(join(dataDir, 'firmware', 'devkit-1.1.0.bin'), IMAGE);
    const ota = { transport, rollout: { version: '1.1.0', url: 'devkit-1.1.0.bin', percent: 0, devices: [mac], ...rollout } } as ConfigInput['ota'];
    const t = await startTestGateway({ dataDir, deviceAuth: 'hmac', deviceSecret: SECRET, ota, enrollment: { policy } });
    cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }));
    cleanup.push(() => t.close());
    const progress: Progress[] = [];
    const off = t.gw.bus.subscribe((e: GatewayEvent) => {
      if (e.type === 'device.notification' && e.deviceId === mac && e.data['method'] === 'notifications/firmware_update')
        progress.push(e.data['params'] as Progress);
    });
    cleanup.push(() => void off());
    return { t, progress };
  };
  const sim = (t: TestGateway, extra: string[] = []) => {
    const root = mkdtempSync(join(tmpdir(), 'voxgate-slots-'));
    cleanup.push(() => rmSync(root, { recursive: true, force: true }));
    const p = new DeviceSimProcess([
      '--ota',
      `${t.baseUrl}/xiaozhi/ota/`,
      '--device-id',
      mac,
      '--reconnect-max-ms',
      '1000',
      '--activation-poll-ms',
      '100',
      '--firmware-version',
      '1.0.0',
      '--firmware-dir',
      root,
      ...extra,
    ]);
    cleanup.push(() => p.stop());
    return { p, root };
  };
  const firmware =
    (state: string, extra: (e: SimEvent) => boolean = () => true) =>
    (e: SimEvent) =>
      e.event === 'firmware' && e['state'] === state && extra(e);
  /** The operator approves the code the device shows. */
  const approve = async (t: TestGateway, p: DeviceSimProcess) => {
    const shown = await p.waitFor((e) => e.event === 'activation' && e['state'] === 'code', 15_000, 'the activation code');
    expect((await t.api('POST', `/v1/enrollments/${String(shown['code'])}/approve`)).status).toBe(200);
  };
  const firmwareVersion = async (t: TestGateway) => (await t.api<{ firmwareVersion: string | null }>('GET', `/v1/devices/${mac}`)).body.firmwareVersion;

  it('downloads a newer image, reports progress, reboots into it and keeps it once initialize is answered', async () => {
    const { t, progress } = await gateway();
    const { p, root } = sim(t);
    await approve(t, p);
    await p.waitFor(firmware('confirmed'), 60_000, 'the new image to be confirmed');
    // After the reboot the device proved its stored credentials to the OTA endpoint, and still holds them.
    expect(await t.metric('voxgate_enrollment_decisions_total', { outcome: 'proven' })).toBeGreaterThanOrEqual(1);
    expect(await t.metric('voxgate_enrollment_decisions_total', { outcome: 'proof_refused' })).toBe(0);
    expect(p.events.filter((e) => e.event === 'activation' && e['state'] === 'code')).toHaveLength(1);

    // The new image is in the other slot, byte for byte, and boots from now on.
    expect(
      createHash('sha256')
        .update(readFileSync(join(slotDir(root), 'ota_1.bin')))
        .digest('hex'),
    ).toBe(IMAGE_SHA);
    expect(JSON.parse(readFileSync(join(slotDir(root), 'otadata.json'), 'utf8'))).toMatchObject({
      boot: 1,
      versions: ['1.0.0', '1.1.0'],
      pending_verify: false,
    });
    // Decision before, then no update once it runs the offered version.
    await p.waitFor(
      firmware('checked', (e) => e['update'] === false),
      15_000,
      'the check after the update',
    );
    const checks = p.events.filter((e) => e.event === 'firmware' && e['state'] === 'checked');
    expect(checks.map((e) => e['update'])).toEqual([true, false]);
    expect(p.events.some(firmware('booted', (e) => e['version'] === '1.1.0' && e['pending_verify'] === true))).toBe(true);

    // The gateway saw the progress as events, and lists the new version.
    await expect.poll(() => progress.some((x) => x.state === 'confirmed'), { timeout: 15_000 }).toBe(true);
    const downloading = progress.filter((x) => x.state === 'downloading');
    expect(downloading.length).toBeGreaterThanOrEqual(2);
    expect(downloading.every((x) => x.version === '1.1.0' && typeof x.percent === 'number')).toBe(true);
    expect(downloading.at(-1)?.percent).toBe(100);
    expect(progress.find((x) => x.state === 'confirmed')?.version).toBe('1.1.0');
    await expect.poll(() => firmwareVersion(t), { timeout: 15_000 }).toBe('1.1.0');
  }, 120_000);

  if (transport === 'mqtt') return; // the failure paths do not depend on the transport

  it('rolls back to the previous image when the new one never reaches the gateway, and does not retry it', async () => {
    const { t, progress } = await gateway({}, 'open');
    const { p, root } = sim(t, ['--broken-version', '1.1.0', '--confirm-deadline-ms', '1500']);
    await p.waitFor(
      firmware('rolling_back', (e) => e['version'] === '1.1.0'),
      60_000,
      'the rollback',
    );
    await p.waitFor(
      firmware('checked', (e) => e['update'] === false),
      60_000,
      'the check after the rollback',
    );
    expect(p.events.find(firmware('checked', (e) => e['update'] === false))?.['reason']).toContain('rolled back');

    await expect.poll(() => progress.find((x) => x.state === 'rolled_back')?.version, { timeout: 15_000 }).toBe('1.1.0');
    expect(progress.some((x) => x.state === 'confirmed')).toBe(false);
    expect(JSON.parse(readFileSync(join(slotDir(root), 'otadata.json'), 'utf8'))).toMatchObject({ boot: 0, rejected: '1.1.0', pending_verify: false });
    await expect.poll(() => firmwareVersion(t), { timeout: 15_000 }).toBe('1.0.0');
  }, 150_000);

  it('refuses an image whose digest does not match the offer: nothing installed, no reboot', async () => {
    const { t, progress } = await gateway({ sha256: 'ab'.repeat(32) }, 'open'); // a digest for another build
    const { p, root } = sim(t);
    const failed = await p.waitFor(firmware('failed'), 60_000, 'the refused download');
    expect(failed['error']).toBe('sha256 mismatch');
    await expect.poll(() => progress.find((x) => x.state === 'failed')?.error, { timeout: 15_000 }).toBe('sha256 mismatch');
    expect(existsSync(join(slotDir(root), 'ota_1.bin'))).toBe(false);
    expect(existsSync(join(slotDir(root), 'ota_1.bin.part'))).toBe(false);
    expect(p.events.some(firmware('rebooting'))).toBe(false);
    expect(await firmwareVersion(t)).toBe('1.0.0');
  }, 90_000);
});
