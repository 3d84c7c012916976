import { z } from 'zod';

/**
 * What the store keeps, validated again when it is read back (the store is outside the process).
 * A binding ties an enrolled device id to one client id and one credential id: the device's credentials
 * are derived from `credId`, so replacing the binding revokes every credential handed out before.
 */
export const BindingSchema = z.object({
  deviceId: z.string(),
  clientId: z.string(),
  credId: z.string().min(16),
  /** Seconds; the `ts` of the device's token. */
  issuedAt: z.number().int(),
  /** False between an operator's approval and the device's next OTA check, which collects the credentials. */
  delivered: z.boolean(),
  via: z.enum(['open', 'approve', 'allowlist']),
  enrolledAt: z.string(),
});
export type Binding = z.infer<typeof BindingSchema>;

/** A device waiting for an operator: the code it shows, and who asked. */
export const ClaimSchema = z.object({
  code: z.string().regex(/^\d{6}$/),
  deviceId: z.string(),
  clientId: z.string(),
  challenge: z.string(),
  status: z.enum(['pending', 'rejected']),
  createdAt: z.number(),
  expiresAt: z.number(),
  remoteAddress: z.string(),
  userAgent: z.string().optional(),
  firmwareVersion: z.string().optional(),
  serialNumber: z.string().optional(),
  /** The board type the device reported (OTA body `board.type`): what `enrollment.tenantRules` may match. */
  board: z.string().optional(),
});
export type Claim = z.infer<typeof ClaimSchema>;
