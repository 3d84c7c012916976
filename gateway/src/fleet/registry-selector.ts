import type { DeviceDirectory } from '../devices/directory.js';
import type { DeviceSelector } from './ports.js';
import type { JobFilter } from './types.js';

const PAGE = 1000;

/**
 * Device selection over the device directory, which lists every device ever admitted (the lasting records,
 * online or not): `tags` (every one), `room` (ignoring case), `board` (what its OTA check said) and
 * `firmware` (its initialize answer, else its OTA report), as GET /v1/devices filters them.
 *
 * `ids` alone selects those ids as given, known or not: a device that has not connected since the last
 * start gets its call when it does. With other fields, `ids` narrows what they select.
 */
export class RegistrySelector implements DeviceSelector {
  constructor(private readonly devices: Pick<DeviceDirectory, 'page'>) {}

  async select(f: JobFilter): Promise<string[]> {
    const ids = f.ids && new Set(f.ids);
    const filter = {
      ...(f.tags !== undefined ? { tags: f.tags } : {}),
      ...(f.room !== undefined ? { room: f.room } : {}),
      ...(f.board !== undefined ? { board: f.board } : {}),
      ...(f.firmware !== undefined ? { firmware: f.firmware } : {}),
    };
    if (ids && Object.keys(filter).length === 0) return [...ids];
    const out: string[] = [];
    let after: string | undefined;
    do {
      const page = this.devices.page(filter, { limit: PAGE, after });
      for (const d of page.devices) if (!ids || ids.has(d.id)) out.push(d.id);
      after = page.next;
    } while (after !== undefined);
    return out;
  }
}
