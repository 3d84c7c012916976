import { DeviceIdSchema } from '@voxgate/protocol';
import { z } from 'zod';
import { Bool, Csv, documented, env, HttpUrl, isPlain } from '../config/fields.js';
import { FirmwareVersion } from './version.js';

/**
 * One staged firmware rollout: `version` at `url` (a file name in <dataDir>/firmware, served at
 * /firmware/<file>, or an absolute http(s) URL) for `percent` of the fleet (stable per device: a hash of
 * its id), always for the listed `devices`, and only for the listed `boards` when given (matched against
 * the OTA body's board.type / board.name and the User-Agent's product).
 */
const FirmwareRollout = z.strictObject({
  version: env('GATEWAY_OTA_ROLLOUT_VERSION', FirmwareVersion(), 'staged firmware rollout: the version offered (numbers and dots only: see [docs/firmware-updates.md](docs/firmware-updates.md))'),
  url: env(
    'GATEWAY_OTA_ROLLOUT_URL',
    z.union([HttpUrl, z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, 'a file name in <dataDir>/firmware or an http(s) URL')]),
    '… its image: a file in `<dataDir>/firmware` (served at `GET /firmware/{file}`) or an http(s) URL',
  ),
  percent: env('GATEWAY_OTA_ROLLOUT_PERCENT', z.coerce.number().min(0).max(100), '… the share of the fleet that gets it (stable per device)'),
  devices: env(
    'GATEWAY_OTA_ROLLOUT_DEVICES',
    z.preprocess((v) => (typeof v === 'string' ? v.split(',').map((s) => s.trim()).filter(Boolean) : v), z.array(DeviceIdSchema).max(10_000)).optional(),
    '… devices that always get it',
  ),
  boards: env('GATEWAY_OTA_ROLLOUT_BOARDS', Csv.pipe(z.array(z.string().max(128)).max(64)).optional(), '… only these boards, when given'),
  /** Ask devices to install it even when it is not newer (a downgrade). */
  force: Bool.optional(),
  /** For an external URL: the image's size and SHA-256 the device checks (local files are measured). */
  sha256: z.string().regex(/^[0-9a-fA-F]{64}$/).optional(),
  size: z.coerce.number().int().min(1).optional(),
});
export type FirmwareRolloutConfig = z.infer<typeof FirmwareRollout>;

/** What the OTA endpoint hands out: the transport section, the fleet-wide firmware, and staged rollouts. */
export const OtaSlice = z.strictObject({
  transport: env('GATEWAY_OTA_TRANSPORT', z.enum(['websocket', 'mqtt']).default('websocket'), 'which section the OTA endpoint hands out'),
  firmwareVersion: env(
    'GATEWAY_FIRMWARE_VERSION',
    FirmwareVersion().default('0.0.0'),
    'firmware version in every OTA answer (sent even with no image; numbers and dots only, or devices abort)',
  ),
  firmwareUrl: env('GATEWAY_FIRMWARE_URL', z.string().default(''), 'firmware image offered to every device', 'empty'),
  timezoneOffsetMinutes: documented(z.coerce.number().int().min(-720).max(840).default(0), '`server_time.timezone_offset`'),
  /** Image downloads (GET /firmware/{file}) in flight per client address, and in all; more is 429 (an image is megabytes). */
  downloadsPerAddress: documented(z.coerce.number().int().min(1).max(1000).default(4), 'firmware downloads in flight per source (an IPv4 address, an IPv6 /64); more is 429'),
  maxDownloads: documented(z.coerce.number().int().min(1).max(100_000).default(64), '… and in all'),
  /** Staged firmware rollouts: one object, or a list (the first that matches a device wins); read as a list. */
  rollout: z.preprocess((v) => (isPlain(v) ? [v] : v), z.array(FirmwareRollout).max(64)).optional(),
});
export type OtaConfig = z.infer<typeof OtaSlice>;
