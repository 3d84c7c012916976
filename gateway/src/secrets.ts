import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';

const SecretsFileSchema = z.object({ apiKey: z.string().min(16).optional(), deviceSecret: z.string().min(16).optional() });
export type SecretsFile = z.infer<typeof SecretsFileSchema>;

export interface ResolvedSecrets {
  apiKeys: string[];
  deviceSecret: string;
  /** Set when this start generated an API key: the caller prints it once. */
  generatedApiKey?: string;
  /** Set when an existing secrets file was readable by others and was tightened to 0600: the old mode, for a warning. */
  tightenedFrom?: string;
}

/**
 * Secrets not given by configuration are generated once and kept in `<dataDir>/secrets.json` (mode 0600),
 * so device credentials and the first API key survive restarts. An existing file that group or others
 * may read is tightened to 0600 before it is read (and refused when that is not possible).
 */
export function resolveSecrets(dataDir: string, configured: { apiKeys: string[]; deviceSecret?: string | undefined }): ResolvedSecrets {
  const file = join(dataDir, 'secrets.json');
  const tightenedFrom = tightenPermissions(file);
  let stored: SecretsFile = {};
  try {
    stored = SecretsFileSchema.parse(JSON.parse(readFileSync(file, 'utf8')));
  } catch (e) {
    // The reason only (never the file's text: JSON.parse and zod may quote it).
    const reason =
      e instanceof SyntaxError ? 'not valid JSON' : e instanceof z.ZodError ? 'not {apiKey?, deviceSecret?} with 16+ character strings' : (e as Error).message;
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`${file}: unreadable secrets file (${reason})`);
  }
  let generatedApiKey: string | undefined;
  const next = { ...stored };
  if (configured.apiKeys.length === 0 && !next.apiKey) next.apiKey = generatedApiKey = `vxg_${randomBytes(24).toString('base64url')}`;
  if (!configured.deviceSecret && !next.deviceSecret) next.deviceSecret = randomBytes(32).toString('base64url');
  if (next.apiKey !== stored.apiKey || next.deviceSecret !== stored.deviceSecret) {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    writeFileSync(file, JSON.stringify(next, null, 2), { mode: 0o600 });
    chmodSync(file, 0o600);
  }
  const out: ResolvedSecrets = {
    apiKeys: configured.apiKeys.length > 0 ? configured.apiKeys : [next.apiKey!],
    deviceSecret: configured.deviceSecret ?? next.deviceSecret!,
  };
  if (generatedApiKey) out.generatedApiKey = generatedApiKey;
  if (tightenedFrom) out.tightenedFrom = tightenedFrom;
  return out;
}

/** chmod 0600 a secrets file that group/others can access; the old mode (octal) when it did; throws when it cannot. */
function tightenPermissions(file: string): string | undefined {
  if (process.platform === 'win32') return undefined; // no POSIX modes
  let mode: number;
  try {
    mode = statSync(file).mode & 0o777;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`${file}: cannot check the secrets file's permissions (${(e as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  if ((mode & 0o077) === 0) return undefined;
  try {
    chmodSync(file, 0o600);
  } catch (e) {
    throw new Error(
      `${file} is readable by group or others (mode ${mode.toString(8)}) and could not be changed to 0600 (${(e as NodeJS.ErrnoException).code ?? 'error'}): ` +
        `run "chmod 600 ${file}" as its owner, or pass the secrets as GATEWAY_DEVICE_SECRET / GATEWAY_API_KEYS instead`,
    );
  }
  return mode.toString(8).padStart(4, '0');
}
