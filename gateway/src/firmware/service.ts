import type { OtaFirmwareSection } from '@voxgate/protocol';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { Counter } from 'prom-client';
import type { Config, FirmwareRolloutConfig } from '../config.js';
import type { Metrics } from '../metrics.js';
import { FirmwareImages } from './images.js';
import { deviceFacts, pickRollout } from './rollout.js';

export interface FirmwareServiceDeps {
  config: Config;
  log: Logger;
  metrics: Metrics;
}

export interface OfferRequest {
  deviceId: string;
  userAgent: string | undefined;
  /** The OTA request body, unvalidated. */
  body: unknown;
  /** How this device reaches the gateway (http://host:port), for /firmware/<file> URLs. */
  base: URL;
}

/** Devices whose reported version is remembered; the OTA endpoint is open, so this must stay bounded. */
const MAX_REPORTED = 100_000;

/**
 * Which firmware each device is offered in its OTA answer (a matching `ota.rollout` entry, else the
 * fleet-wide `ota.firmwareVersion`/`firmwareUrl`), the images served at /firmware/<file>, and the version
 * each device last reported.
 */
export class FirmwareService {
  readonly images: FirmwareImages;
  private readonly rollouts: readonly FirmwareRolloutConfig[];
  private readonly reported = new Map<string, string>();
  private readonly offers: Counter<'source'>;
  readonly downloads: Counter<'outcome'>;

  constructor(private readonly d: FirmwareServiceDeps) {
    this.images = new FirmwareImages(join(d.config.dataDir, 'firmware'));
    this.rollouts = d.config.ota.rollout ?? [];
    this.offers = new Counter({ name: 'voxgate_firmware_offers_total', help: 'OTA answers by where their firmware section came from', labelNames: ['source'] as const, registers: [d.metrics.registry] });
    this.downloads = new Counter({ name: 'voxgate_firmware_downloads_total', help: 'GET /firmware/<file> by outcome', labelNames: ['outcome'] as const, registers: [d.metrics.registry] });
  }

  /** The `firmware` section of one device's OTA answer; also remembers the version the device reported. */
  async offerFor(req: OfferRequest): Promise<OtaFirmwareSection> {
    const facts = deviceFacts(req.userAgent, req.body);
    if (facts.version) this.remember(req.deviceId, facts.version);
    const rollout = pickRollout(this.rollouts, req.deviceId, facts);
    if (rollout) {
      const section = await this.section(rollout.version, rollout.url, req.base, rollout);
      if (section) {
        this.offers.inc({ source: 'rollout' });
        this.d.log.debug({ deviceId: req.deviceId, from: facts.version, to: rollout.version }, 'firmware rollout offered');
        return section;
      }
    }
    const c = this.d.config.ota;
    const baseline = c.firmwareUrl ? await this.section(c.firmwareVersion, c.firmwareUrl, req.base, {}) : undefined;
    this.offers.inc({ source: baseline ? 'baseline' : 'none' });
    return baseline ?? { version: c.firmwareVersion, url: '' };
  }

  /** The version a device last reported to the OTA endpoint, if any. */
  reportedVersion(deviceId: string): string | undefined {
    return this.reported.get(deviceId);
  }

  private remember(deviceId: string, version: string): void {
    this.reported.delete(deviceId);
    if (this.reported.size >= MAX_REPORTED) this.reported.delete(this.reported.keys().next().value!);
    this.reported.set(deviceId, version);
  }

  /**
   * A file name becomes <base>/firmware/<file> with the file's size and digest, so the device can check
   * what it downloaded; a missing file offers nothing (a device would only fail on it). An absolute URL is
   * passed on with the size and digest the operator configured, if any.
   */
  private async section(version: string, url: string, base: URL, extra: { force?: boolean | undefined; size?: number | undefined; sha256?: string | undefined }): Promise<OtaFirmwareSection | undefined> {
    const out: OtaFirmwareSection = { version, url };
    if (/^https?:\/\//i.test(url)) {
      if (extra.size !== undefined) out.size = extra.size;
      if (extra.sha256 !== undefined) out.sha256 = extra.sha256.toLowerCase();
    } else {
      const info = await this.images.info(url);
      if (!info) {
        this.d.log.warn({ file: url, dir: this.images.dir }, 'firmware image missing: not offered');
        return undefined;
      }
      out.url = new URL(`/firmware/${encodeURIComponent(url)}`, base).toString();
      out.size = info.size;
      // A digest configured for a local file is a claim about it: pass the configured one on, so a
      // mismatch (a wrong file published) is caught by the device rather than hidden here.
      out.sha256 = (extra.sha256 ?? info.sha256).toLowerCase();
    }
    if (extra.force) out.force = 1;
    return out;
  }
}
