import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';

const SecretsFileSchema = z.object({ apiKey: z.string().min(16).optional(), deviceSecret: z.string().min(16).optional() });
export type SecretsFile = z.infer<typeof SecretsFileSchema>;

export interface ResolvedSecrets {
  apiKeys: string[];
  deviceSecret: string;
  /** Set when this start generated an API key: the caller prints it once. */
  generatedApiKey?: string;
}

/**
 * Secrets not given by configuration are generated once and kept in `<dataDir>/secrets.json` (mode 0600),
 * so device credentials and the first API key survive restarts.
 */
export function resolveSecrets(dataDir: string, configured: { apiKeys: string[]; deviceSecret?: string | undefined }): ResolvedSecrets {
  const file = join(dataDir, 'secrets.json');
  let stored: SecretsFile = {};
  try {
    stored = SecretsFileSchema.parse(JSON.parse(readFileSync(file, 'utf8')));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`${file}: unreadable secrets file (${(e as Error).message})`);
  }
  let generatedApiKey: string | undefined;
  const next = { ...stored };
  if (configured.apiKeys.length === 0 && !next.apiKey) next.apiKey = generatedApiKey = `vxg_${randomBytes(24).toString('base64url')}`;
  if (!configured.deviceSecret && !next.deviceSecret) next.deviceSecret = randomBytes(32).toString('base64url');
  if (next.apiKey !== stored.apiKey || next.deviceSecret !== stored.deviceSecret) {
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(file, JSON.stringify(next, null, 2), { mode: 0o600 });
    chmodSync(file, 0o600);
  }
  const out: ResolvedSecrets = {
    apiKeys: configured.apiKeys.length > 0 ? configured.apiKeys : [next.apiKey!],
    deviceSecret: configured.deviceSecret ?? next.deviceSecret!,
  };
  if (generatedApiKey) out.generatedApiKey = generatedApiKey;
  return out;
}
