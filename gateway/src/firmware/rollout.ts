import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { FirmwareRolloutConfig } from './config.js';

/** What the OTA request tells us about the device's firmware: its version and the names of its board. */
export interface DeviceFacts {
  version: string | undefined;
  /** board.type, board.name and the User-Agent's product, as sent (each matched exactly). */
  boards: string[];
}

// The OTA body is hostile free-form JSON: read only these bounded strings, ignore everything else.
const Short = z.string().min(1).max(128).optional().catch(undefined);
const OtaBodyFacts = z
  .object({
    application: z.object({ version: z.string().min(1).max(64).optional().catch(undefined) }).optional().catch(undefined),
    board: z.object({ type: Short, name: Short }).optional().catch(undefined),
  })
  .catch({});

/**
 * The device's version and board from the OTA body (`application.version`, `board.type`, `board.name`)
 * and its `User-Agent` (`<board-name>/<version>`, as both firmwares send it); the body wins.
 */
export function deviceFacts(userAgent: string | undefined, body: unknown): DeviceFacts {
  const b = OtaBodyFacts.parse(body ?? {});
  const ua = /^([A-Za-z0-9._-]{1,128})\/([A-Za-z0-9.+-]{1,64})(?:\s|$)/.exec(userAgent ?? '');
  const boards = [b.board?.type, b.board?.name, ua?.[1]].filter((x): x is string => x !== undefined);
  return { version: b.application?.version ?? ua?.[2], boards: [...new Set(boards)] };
}

/**
 * Where a device falls in the fleet, in [0, 100): the first 32 bits of SHA-256(device id). Stable, so a
 * device in a 10 % rollout stays in it at 20 %, and the same for every gateway instance.
 */
export function rolloutBucket(deviceId: string): number {
  return (createHash('sha256').update(deviceId).digest().readUInt32BE(0) / 2 ** 32) * 100;
}

/** The first rollout that covers this device: its board matches (when listed) and it is listed or in the share. */
export function pickRollout(rollouts: readonly FirmwareRolloutConfig[], deviceId: string, facts: DeviceFacts): FirmwareRolloutConfig | undefined {
  const bucket = rolloutBucket(deviceId);
  return rollouts.find((r) => {
    if (r.boards?.length && !r.boards.some((b) => facts.boards.includes(b))) return false;
    return (r.devices?.includes(deviceId) ?? false) || bucket < r.percent;
  });
}
