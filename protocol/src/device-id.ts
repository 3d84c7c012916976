import { z } from 'zod';

/**
 * Device ids are lowercase MACs with colons (`aa:bb:cc:dd:ee:ff`), the way the reference firmware sends
 * `Device-Id`. Callers may write `:`, `_`, `-` or no separator, in any case.
 */
const MAC_LOOSE = /^[0-9a-f]{2}([:_-]?)[0-9a-f]{2}(?:\1[0-9a-f]{2}){4}$/i;

export function normalizeDeviceId(input: string): string | undefined {
  if (isCanonicalDeviceId(input)) return input;
  const s = input.trim();
  if (s.length > 17 || !MAC_LOOSE.test(s)) return undefined;
  const hex = s.replace(/[:_-]/g, '').toLowerCase();
  return hex.match(/../g)!.join(':');
}

/**
 * Already `aa:bb:cc:dd:ee:ff` in lowercase (how devices send it and the API writes it): the usual input, read
 * with one pass over its characters instead of three regular expressions and their strings.
 */
function isCanonicalDeviceId(s: string): boolean {
  if (s.length !== 17) return false;
  for (let i = 0; i < 17; i++) {
    const c = s.charCodeAt(i);
    if (i % 3 === 2 ? c !== 0x3a /* : */ : !((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66))) return false;
  }
  return true;
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
