import type { OtaFirmwareSection } from '@voxgate/protocol';
import type { Logger } from 'pino';
import { Counter } from 'prom-client';
import type { FirmwareRolloutConfig, OtaConfig } from './config.js';
import type { Metrics } from '../metrics.js';
import { BoundedLru } from '../throttle/bounded-lru.js';
import { FirmwareImages } from './images.js';
import { firmwareVersionProblem, isNewerFirmware } from './version.js';
import { deviceFacts, pickRollout, rolloutBucket, type DeviceFacts } from './rollout.js';

export interface FirmwareServiceDeps {
  settings: Pick<OtaConfig, 'firmwareVersion' | 'firmwareUrl' | 'rollout'>;
  /** Where the images are (<dataDir>/firmware). */
  imagesDir: string;
  log: Logger;
  metrics: Metrics;
  /**
   * Whether the gateway has recorded the device (devices/records.ts: it connected): its report is kept apart from those
   * of ids no device has used, which anyone may name in a check. Absent: every report counts as a stranger's.
   */
  isKnown?: (deviceId: string) => boolean;
  /** Reports kept for ids not known (STRANGER_REPORTS unless set; tests set it small). */
  maxStrangerReports?: number;
}

export interface OfferRequest {
  deviceId: string;
  userAgent: string | undefined;
  /** The OTA request body, unvalidated. */
  body: unknown;
  /** How this device reaches the gateway (http://host:port), for /firmware/<file> URLs. */
  base: URL;
}

/** Known devices whose reported version is remembered, oldest out past it (devices.maxKnown bounds them already). */
const MAX_REPORTED = 100_000;
/**
 * Reports of ids the gateway has not recorded (a device checking in before its first connection, or ids made up: the
 * OTA endpoint is open). Least recently reported out past it: a flood of made-up ids takes these places only.
 */
const STRANGER_REPORTS = 10_000;

/** What the OTA answer would offer a device now, for people (GET /v1/devices/{id}/firmware). */
export interface FirmwarePreview {
  /** The version and boards from the device's last OTA request (boards: only those a rollout names). */
  reported: { version: string | null; boards: string[] } | null;
  source: 'rollout' | 'baseline' | 'none';
  offer: OtaFirmwareSection;
  /** The rollout entry that covers the device, and why: listed in `devices`, or in its `percent`. */
  rollout: { version: string; percent: number; listed: boolean; bucket: number } | null;
}

interface Decision {
  source: FirmwarePreview['source'];
  offer: OtaFirmwareSection;
  rollout: FirmwareRolloutConfig | undefined;
  /** A configured image that is not in <dataDir>/firmware (so not offered). */
  missing: string[];
}

/**
 * Which firmware each device is offered in its OTA answer (a matching `ota.rollout` entry, else the
 * fleet-wide `ota.firmwareVersion`/`firmwareUrl`), the images served at /firmware/<file>, and the version
 * each device last reported.
 */
export class FirmwareService {
  readonly images: FirmwareImages;
  private readonly rollouts: readonly FirmwareRolloutConfig[];
  /** Reports of known devices, in the order they came (the oldest goes first past MAX_REPORTED). */
  private readonly reported = new Map<string, DeviceFacts>();
  private readonly strangers: BoundedLru<string, DeviceFacts>;
  /** The boards rollouts name: only these are remembered per device (bounded by the config, not by devices). */
  private readonly rolloutBoards: ReadonlySet<string>;
  private readonly offers: Counter<'source'>;
  readonly downloads: Counter<'outcome'>;

  constructor(private readonly d: FirmwareServiceDeps) {
    this.images = new FirmwareImages(d.imagesDir);
    this.strangers = new BoundedLru(d.maxStrangerReports ?? STRANGER_REPORTS);
    this.rollouts = d.settings.rollout ?? [];
    this.rolloutBoards = new Set(this.rollouts.flatMap((r) => r.boards ?? []));
    this.offers = new Counter({ name: 'voxgate_firmware_offers_total', help: 'OTA answers by where their firmware section came from', labelNames: ['source'] as const, registers: [d.metrics.registry] });
    this.downloads = new Counter({ name: 'voxgate_firmware_downloads_total', help: 'GET /firmware/<file> by outcome', labelNames: ['outcome'] as const, registers: [d.metrics.registry] });
  }

  /**
   * The `firmware` section of one device's OTA answer, for what the check says it runs. Nothing is remembered: a
   * check may name a device it does not speak for (see `rememberReport`).
   */
  async offerFor(req: OfferRequest): Promise<OtaFirmwareSection> {
    const facts = deviceFacts(req.userAgent, req.body);
    const d = await this.decide(req.deviceId, facts, req.base);
    for (const file of d.missing) this.d.log.warn({ file, dir: this.images.dir }, 'firmware image missing: not offered');
    this.offers.inc({ source: d.source });
    if (d.rollout) {
      // What the device will decide, by its own comparison (a version it reported that it cannot read itself is not compared).
      const installs = d.rollout.force === true || facts.version === undefined || firmwareVersionProblem(facts.version) !== undefined || isNewerFirmware(facts.version, d.rollout.version);
      this.d.log.debug({ deviceId: req.deviceId, from: facts.version, to: d.rollout.version, installs }, 'firmware rollout offered');
    }
    return d.offer;
  }

  /**
   * What the device's next OTA check would be offered, from what it reported last time (read-only: no
   * counter, nothing remembered). A device that never checked in matches rollouts by id and share only.
   */
  async preview(deviceId: string, base: URL): Promise<FirmwarePreview> {
    const facts = this.reportOf(deviceId);
    const d = await this.decide(deviceId, facts ?? { version: undefined, boards: [] }, base);
    return {
      reported: facts ? { version: facts.version ?? null, boards: facts.boards } : null,
      source: d.source,
      offer: d.offer,
      rollout: d.rollout ? { version: d.rollout.version, percent: d.rollout.percent, listed: d.rollout.devices?.includes(deviceId) ?? false, bucket: rolloutBucket(deviceId) } : null,
    };
  }

  /** The version a device last reported to the OTA endpoint, if any. */
  reportedVersion(deviceId: string): string | undefined {
    return this.reportOf(deviceId)?.version;
  }

  /** Reports held now: of known devices, and of ids not known (at most maxStrangerReports). */
  get reportsHeld(): { known: number; strangers: number } {
    return { known: this.reported.size, strangers: this.strangers.size };
  }

  /**
   * The device was forgotten (DELETE, here or on another instance, or past devices.maxKnown): its report goes with its
   * record, wherever it is kept, so neither the preview nor the device listing shows it afterwards.
   */
  forgetReport(deviceId: string): void {
    this.reported.delete(deviceId);
    this.strangers.delete(deviceId);
  }

  private reportOf(deviceId: string): DeviceFacts | undefined {
    return this.reported.get(deviceId) ?? this.strangers.get(deviceId);
  }

  /** A matching rollout with its image, else the baseline with its image, else nothing (`url: ""`). */
  private async decide(deviceId: string, facts: DeviceFacts, base: URL): Promise<Decision> {
    const missing: string[] = [];
    const rollout = pickRollout(this.rollouts, deviceId, facts);
    if (rollout) {
      const offer = await this.section(rollout.version, rollout.url, base, rollout);
      if (offer) return { source: 'rollout', offer, rollout, missing };
      missing.push(rollout.url);
    }
    const c = this.d.settings;
    const baseline = c.firmwareUrl ? await this.section(c.firmwareVersion, c.firmwareUrl, base, {}) : undefined;
    if (c.firmwareUrl && !baseline) missing.push(c.firmwareUrl);
    return baseline ? { source: 'baseline', offer: baseline, rollout: undefined, missing } : { source: 'none', offer: { version: c.firmwareVersion, url: '' }, rollout: undefined, missing };
  }

  /**
   * Remembers the version (and rollout boards) a check reported, for the preview and the device listing. Called only for
   * a check that counts as the device's own (api/ota.ts): anyone can name a device in a check, and a stranger's must not
   * set the firmware version an operator sees for it. Ids no device has used go to a place of their own: one map for
   * all, oldest out, let a flood of made-up ids push out the reports of the fleet's devices.
   */
  rememberReport(req: Pick<OfferRequest, 'deviceId' | 'userAgent' | 'body'>): void {
    const facts = deviceFacts(req.userAgent, req.body);
    if (!facts.version && !facts.boards.some((b) => this.rolloutBoards.has(b))) return;
    const kept: DeviceFacts = { version: facts.version, boards: facts.boards.filter((b) => this.rolloutBoards.has(b)) };
    // One place per id: the newest report is the one read, whichever map it went to (`reportOf` reads the known first).
    this.reported.delete(req.deviceId);
    if (!this.d.isKnown?.(req.deviceId)) return this.strangers.set(req.deviceId, kept);
    this.strangers.delete(req.deviceId);
    if (this.reported.size >= MAX_REPORTED) this.reported.delete(this.reported.keys().next().value!);
    this.reported.set(req.deviceId, kept);
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
      if (!info) return undefined;
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
