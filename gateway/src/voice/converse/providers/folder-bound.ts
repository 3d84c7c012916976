/**
 * Keeps what a program writes into its private folder under a bound while it runs. A synthesiser writing its WAV to a
 * file was size-checked only once it exited: one that wrote without end filled the disk first.
 */
import { watch, type FSWatcher } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';

/** How often the folder is measured where it cannot be watched (no inotify watch left, a file system without notices). */
const POLL_MS = 50;

/**
 * Calls `onOver` once, as soon as the files in `dir` hold more than `maxBytes` together; the returned function stops
 * watching. Woken by the kernel's notice of each change in the folder (fs.watch: inotify, FSEvents), not by a timer:
 * the kernel merges a run of identical notices, and one measurement (a readdir, a stat per file) runs at a time, with
 * one more after it when a notice came meanwhile. It measures once at the start too, for writes made before the watch.
 */
export function watchFolderSize(dir: string, maxBytes: number, onOver: (bytes: number) => void): () => void {
  let stopped = false;
  let measuring = false;
  let again = false;
  let watcher: FSWatcher | undefined;
  let poll: NodeJS.Timeout | undefined;
  const stop = (): void => {
    stopped = true;
    watcher?.close();
    clearInterval(poll);
  };
  const measure = async (): Promise<void> => {
    if (stopped) return;
    if (measuring) {
      again = true;
      return;
    }
    measuring = true;
    try {
      do {
        again = false;
        const bytes = await folderBytes(dir);
        if (stopped) return;
        if (bytes > maxBytes) {
          stop();
          onOver(bytes);
          return;
        }
      } while (again);
    } finally {
      measuring = false;
    }
  };
  const wake = (): void => void measure();
  const pollInstead = (): void => {
    watcher?.close();
    watcher = undefined;
    if (stopped || poll) return;
    poll = setInterval(wake, POLL_MS);
    poll.unref();
  };
  try {
    watcher = watch(dir, { persistent: false }, wake);
    watcher.on('error', pollInstead);
  } catch {
    pollInstead();
  }
  wake();
  return stop;
}

/** The bytes of the regular files directly in `dir` (a file gone meanwhile counts 0). */
async function folderBytes(dir: string): Promise<number> {
  let total = 0;
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const e of entries) if (e.isFile()) total += (await stat(join(dir, e.name)).catch(() => undefined))?.size ?? 0;
  return total;
}
