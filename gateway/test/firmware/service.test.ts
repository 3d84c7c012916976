import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { OtaConfig } from '../../src/firmware/config.js';
import { FirmwareService, type FirmwareServiceDeps } from '../../src/firmware/service.js';
import { createMetrics } from '../../src/metrics.js';

const mac = (i: number) => `02:00:00:00:00:${i.toString(16).padStart(2, '0')}`;
const BASE = new URL('http://gw.local:8000');

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** The firmware service over an empty image directory, its log lines kept. */
function service(settings: Partial<OtaConfig>, extra: Pick<FirmwareServiceDeps, 'isKnown' | 'maxStrangerReports'> = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'voxgate-fw-'));
  dirs.push(dir);
  const logs: Array<Record<string, unknown>> = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
  const firmware = new FirmwareService({ settings: { firmwareVersion: '0.0.0', firmwareUrl: '', ...settings }, imagesDir: dir, log, metrics: createMetrics(), ...extra });
  return { firmware, logs };
}
const offer = (firmware: FirmwareService, deviceId: string, body: unknown = {}, userAgent = 'voxgate-devkit/1.0.0') =>
  firmware.offerFor({ deviceId, userAgent, body, base: BASE });

describe('FirmwareService: what the OTA answer offers', () => {
  it('offers nothing from a rollout whose image is missing, and says so in the log', async () => {
    const { firmware, logs } = service({ rollout: [{ version: '1.1.0', url: 'missing-1.1.0.bin', percent: 100 }] });
    expect(await offer(firmware, mac(0))).toEqual({ version: '0.0.0', url: '' });
    expect(logs.some((l) => l['msg'] === 'firmware image missing: not offered' && l['file'] === 'missing-1.1.0.bin')).toBe(true);
  });

  it('passes force on as 1, and a configured digest for an external URL', async () => {
    const { firmware } = service({
      rollout: [{ version: '0.9.0', url: 'https://cdn.example.com/0.9.0.bin', percent: 100, force: true, sha256: 'AB'.repeat(32), size: 1000 }],
    });
    expect(await offer(firmware, mac(1))).toEqual({ version: '0.9.0', url: 'https://cdn.example.com/0.9.0.bin', force: 1, size: 1000, sha256: 'ab'.repeat(32) });
  });

  it('falls back to the baseline, and remembers the version a report that counts gave', async () => {
    const { firmware } = service({ firmwareVersion: '1.0.5', firmwareUrl: 'https://fw.example.com/1.0.5.bin' });
    const check = { deviceId: mac(2), userAgent: 'voxgate-devkit/1.0.0', body: { application: { version: '1.0.1' } } };
    expect(await firmware.offerFor({ ...check, base: BASE })).toEqual({ version: '1.0.5', url: 'https://fw.example.com/1.0.5.bin' });
    // The offer alone remembers nothing: the OTA route decides whether the check speaks for the device.
    expect(firmware.reportedVersion(mac(2))).toBeUndefined();
    firmware.rememberReport(check);
    expect(firmware.reportedVersion(mac(2))).toBe('1.0.1');
    expect(firmware.reportedVersion(mac(3))).toBeUndefined();
    // A check that says nothing about the version or a rollout's board is not remembered.
    firmware.rememberReport({ deviceId: mac(3), userAgent: 'curl', body: {} });
    expect(firmware.reportedVersion(mac(3))).toBeUndefined();
  });
});

describe('FirmwareService: the reports it keeps', () => {
  const report = (deviceId: string, version: string) => ({ deviceId, userAgent: 'voxgate-devkit/1.0.0', body: { application: { version } } });

  it("a flood of checks naming made-up ids never pushes out a known device's report, and holds a bounded number of them", () => {
    const known = new Set([mac(10), mac(11)]);
    const { firmware } = service({}, { isKnown: (id) => known.has(id), maxStrangerReports: 64 });
    firmware.rememberReport(report(mac(10), '1.2.3'));
    firmware.rememberReport(report(mac(11), '1.2.4'));
    // More than the 100 000 reports the service kept in all: before, one map, oldest out, so the fleet's went first.
    const madeUp = (i: number) => `06:66:${[i >> 16, (i >> 8) & 0xff, i & 0xff, 0].map((b) => b.toString(16).padStart(2, '0')).join(':')}`;
    for (let i = 0; i < 100_500; i++) firmware.rememberReport(report(madeUp(i), '6.6.6'));
    expect(firmware.reportedVersion(mac(10))).toBe('1.2.3');
    expect(firmware.reportedVersion(mac(11))).toBe('1.2.4');
    expect(firmware.reportsHeld).toEqual({ known: 2, strangers: expect.any(Number) as number });
    expect(firmware.reportsHeld.strangers).toBeLessThanOrEqual(64);
  });

  it("keeps a stranger's report until newer strangers' push it out; once the device is known, its report is kept apart", () => {
    const known = new Set<string>();
    const { firmware } = service({}, { isKnown: (id) => known.has(id), maxStrangerReports: 8 });
    // A device checking in before its first connection: its report is there for the preview.
    firmware.rememberReport(report(mac(20), '2.0.0'));
    expect(firmware.reportedVersion(mac(20))).toBe('2.0.0');
    for (let i = 0; i < 16; i++) firmware.rememberReport(report(`06:66:00:00:01:${i.toString(16).padStart(2, '0')}`, '6.6.6'));
    expect(firmware.reportedVersion(mac(20))).toBeUndefined();
    // It connected (the records know it): its next check is kept with the fleet's, whatever strangers come after.
    known.add(mac(20));
    firmware.rememberReport(report(mac(20), '2.0.1'));
    for (let i = 0; i < 16; i++) firmware.rememberReport(report(`06:66:00:00:02:${i.toString(16).padStart(2, '0')}`, '6.6.6'));
    expect(firmware.reportedVersion(mac(20))).toBe('2.0.1');
    expect(firmware.reportsHeld.known).toBe(1);
  });

  it('a forgotten device has no report, known or stranger; its next report, known or not, is the one read', () => {
    const known = new Set([mac(30)]);
    const { firmware } = service({}, { isKnown: (id) => known.has(id) });
    firmware.rememberReport(report(mac(30), '3.0.0'));
    firmware.rememberReport(report(mac(31), '3.1.0'));
    expect(firmware.reportsHeld).toEqual({ known: 1, strangers: 1 });
    firmware.forgetReport(mac(30));
    firmware.forgetReport(mac(31));
    expect(firmware.reportedVersion(mac(30))).toBeUndefined();
    expect(firmware.reportedVersion(mac(31))).toBeUndefined();
    expect(firmware.reportsHeld).toEqual({ known: 0, strangers: 0 });
    // Forgotten, the device is no longer known: its next check is a stranger's, and it is what is read.
    known.delete(mac(30));
    firmware.rememberReport(report(mac(30), '3.0.1'));
    expect(firmware.reportedVersion(mac(30))).toBe('3.0.1');
    // Dropped past devices.maxKnown without a forget reaching the report: a stranger's check still replaces it.
    known.add(mac(32));
    firmware.rememberReport(report(mac(32), '3.2.0'));
    known.delete(mac(32));
    firmware.rememberReport(report(mac(32), '3.2.1'));
    expect(firmware.reportedVersion(mac(32))).toBe('3.2.1');
    expect(firmware.reportsHeld).toEqual({ known: 0, strangers: 2 });
  });
});
