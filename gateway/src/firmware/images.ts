import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';

/** Image names are plain file names: no separators, no leading dot, so no way out of the directory. */
const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export function isSafeImageName(name: string): boolean {
  return SAFE_NAME.test(name) && !name.includes('..');
}

export interface ImageInfo {
  path: string;
  size: number;
  /** Lowercase hex SHA-256 of the file. */
  sha256: string;
}

/**
 * The firmware images in one directory (<dataDir>/firmware). The digest of each file is computed once and
 * kept while its size and modification time stay the same; publish a new image by writing it under a
 * temporary name and renaming it, so no reader ever sees half a file.
 */
export class FirmwareImages {
  private readonly cache = new Map<string, { mtimeMs: number; ino: number; info: ImageInfo }>();
  private readonly pending = new Map<string, Promise<ImageInfo | undefined>>();

  constructor(readonly dir: string, private readonly maxCached = 256) {}

  /** Size and digest of `name`, or undefined when it is not a safe name or not a regular file. */
  async info(name: string): Promise<ImageInfo | undefined> {
    if (!isSafeImageName(name)) return undefined;
    const path = join(this.dir, name);
    const st = await stat(path).catch(() => undefined);
    if (!st?.isFile()) return undefined;
    const hit = this.cache.get(name);
    if (hit && hit.mtimeMs === st.mtimeMs && hit.ino === st.ino && hit.info.size === st.size) return hit.info;
    // One hash per file at a time, however many devices ask at once.
    const key = `${name}\0${st.ino}\0${st.mtimeMs}\0${st.size}`;
    let p = this.pending.get(key);
    if (!p) {
      p = sha256File(path)
        .then((digest) => {
          const info = { path, size: st.size, sha256: digest };
          if (this.cache.size >= this.maxCached) this.cache.delete(this.cache.keys().next().value!);
          this.cache.set(name, { mtimeMs: st.mtimeMs, ino: st.ino, info });
          return info;
        })
        .catch(() => undefined)
        .finally(() => this.pending.delete(key));
      this.pending.set(key, p);
    }
    return p;
  }
}

function sha256File(path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const hash = createHash('sha256');
    createReadStream(path)
      .on('data', (chunk) => hash.update(chunk))
      .on('error', reject)
      .on('end', () => resolve(hash.digest('hex')));
  });
}
