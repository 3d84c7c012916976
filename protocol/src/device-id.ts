import { z } from 'zod';

/**
 * Device ids are lowercase MACs with colons (`aa:bb:cc:dd:ee:ff`), the way the reference firmware sends
 * `Device-Id`. Callers may write `:`, `_`, `-` or no separator, in any case.
 */
const MAC_LOOSE = /^[0-9a-f]{2}([:_-]?)[0-9a-f]{2}(?:\1[0-9a-f]{2}){4}$/i;

export function normalizeDeviceId(input: string): string | undefined {
  const s = input.trim();
  if (s.length > 17 || !MAC_LOOSE.test(s)) return undefined;
  const hex = s.replace(/[:_-]/g, '').toLowerCase();
  return hex.match(/../g)!.join(':');
}

/** `aa:bb:..` -> `aa_bb_..`, the form used in MQTT client ids and topics. */
export function deviceIdToUnderscored(deviceId: string): string {
  return deviceId.replace(/:/g, '_');
}

export const DeviceIdSchema = z
  .string()
  .max(64)
  .transform((s, ctx) => {
    const id = normalizeDeviceId(s);
    if (!id) {
      ctx.addIssue({ code: 'custom', message: 'expected a MAC address such as aa:bb:cc:dd:ee:ff' });
      return z.NEVER;
    }
    return id;
  });
