import { normalizeDeviceId } from '@voxgate/protocol';
import { z } from 'zod';
import { Csv, documented, env, Int, Tenant } from '../config/fields.js';

/** A MAC prefix of 1 to 6 octets, any case, `:` or `-` between them. */
const MAC_PREFIX = /^[0-9A-Fa-f]{2}([:-][0-9A-Fa-f]{2}){0,5}$/;

/**
 * `enrollment.tenantRules[]`: a device without a tenant gets `tenant` when every matcher given matches what it
 * reported at its OTA check (its id, its client id, its board type). At least one matcher. See devices/tenants.ts.
 */
export const TenantRuleSchema = z
  .strictObject({
    tenant: Tenant,
    macPrefix: z.string().regex(MAC_PREFIX, 'a MAC prefix such as aa:bb:cc').optional(),
    clientIdPrefix: z.string().min(1).max(64).optional(),
    board: z.string().min(1).max(128).optional(),
  })
  .refine(
    (r) => r.macPrefix !== undefined || r.clientIdPrefix !== undefined || r.board !== undefined,
    'a tenant rule needs macPrefix, clientIdPrefix or board',
  );
export type TenantRule = z.infer<typeof TenantRuleSchema>;

/**
 * Which devices may get credentials from the OTA endpoint (hmac device auth only; `open` and `token`
 * mint nothing). `approve`: a new device shows a 6-digit code and waits for an operator; `open`: the
 * first device to ask for an id gets it; `allowlist`: only the listed ids. An enrolled device id is
 * bound to its credentials either way.
 */
export const EnrollmentSlice = z.strictObject({
  policy: env(
    'GATEWAY_ENROLLMENT',
    z.enum(['open', 'approve', 'allowlist']).default('approve'),
    'who gets credentials from OTA: `approve`, `open` or `allowlist`',
  ),
  /** Device ids (any MAC spelling) that `allowlist` admits. */
  allowlist: env(
    'GATEWAY_ENROLLMENT_ALLOWLIST',
    Csv.refine((ids) => ids.every((id) => normalizeDeviceId(id) !== undefined), 'every entry must be a MAC address such as aa:bb:cc:dd:ee:ff').default([]),
    'comma-separated device ids for `allowlist`',
  ),
  /** A pending activation code lives this long after the device's last OTA check. */
  pendingTtlSeconds: env('GATEWAY_ENROLLMENT_PENDING_TTL_S', Int(60, 30 * 24 * 3600, 3600), "a pending code lives this long after the device's last check"),
  maxPending: documented(z.coerce.number().int().min(1).max(100_000).default(1000), 'devices waiting for approval'),
  /** Codes one source holds for one device id; past it its oldest for the id goes. Sources never block each other. */
  maxPendingPerDevice: documented(z.coerce.number().int().min(1).max(100).default(4), '… codes per device id from one source'),
  /** Enrollments of device ids that have not connected (or were forgotten) kept at most, the oldest dropped past it. */
  maxUnconnected: documented(
    z.coerce.number().int().min(1).max(10_000_000).default(10_000),
    'enrollments of ids that never connected (or were forgotten) kept at most, whatever the policy; past it the oldest go (such a device enrolls again at its next check)',
  ),
  /** Optional (not defaulted): unset, it follows maxPending (a quarter of it). */
  maxPendingPerAddress: documented(
    z.coerce.number().int().min(1).max(100_000).optional(),
    '… devices waiting from one source (an IPv4 address, an IPv6 /64): one source cannot take every place',
    'a quarter of `maxPending`, rounded up',
  ),
  /** OTA and activation requests per source address: a token bucket of `burst`, refilled at `perSecond`. */
  rateLimit: z
    .strictObject({
      perSecond: env(
        'GATEWAY_OTA_RATE_PER_SECOND',
        z.coerce.number().min(0.01).max(10_000).default(2),
        'OTA + activation requests per source (an IPv4 address, an IPv6 /64) per second',
      ),
      burst: env('GATEWAY_OTA_RATE_BURST', z.coerce.number().int().min(1).max(100_000).default(60), '… and their burst'),
      /** Addresses tracked at once; the least recently seen is forgotten first. */
      maxAddresses: documented(z.coerce.number().int().min(100).max(10_000_000).default(100_000), 'source addresses tracked (least recently seen forgotten)'),
    })
    .prefault({}),
  /** Optional (not defaulted): a gateway without rules has the same configuration as before they existed. */
  tenantRules: documented(
    z.array(TenantRuleSchema).max(256).optional(),
    'rules giving a device without a tenant its tenant: `[{tenant, macPrefix?, clientIdPrefix?, board?}]`, first match wins',
    'none',
  ),
});
export type EnrollmentConfig = z.infer<typeof EnrollmentSlice>;
