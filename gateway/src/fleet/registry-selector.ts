import type { DeviceDirectory } from '../devices/directory.js';
import { GatewayError } from '../errors.js';
import type { DeviceSelector } from './ports.js';
import type { JobFilter } from './types.js';

const PAGE = 1000;

/**
 * Device selection over what the device directory knows: ids, and the board and firmware a device's
 * `initialize` named (serverInfo name and version). `tags` and `room` are a person's metadata, kept by
 * the lasting device records (devices/records.ts): until those are plugged in here, a filter naming them
 * is refused rather than matching nothing in silence.
 *
 * `ids` alone selects those ids as given, known or not: a device that has not connected since the last
 * start gets its call when it does.
 */
export class RegistrySelector implements DeviceSelector {
  constructor(private readonly devices: Pick<DeviceDirectory, 'page'>) {}

  async select(f: JobFilter): Promise<string[]> {
    if (f.tags !== undefined || f.room !== undefined)
      throw new GatewayError('INVALID_REQUEST', 'filter.tags and filter.room need device records with tags and rooms, which this gateway does not keep yet');
    const ids = f.ids && new Set(f.ids);
    if (ids && f.board === undefined && f.firmware === undefined) return [...ids];
    const out: string[] = [];
    let after: string | undefined;
    do {
      const page = this.devices.page({}, { limit: PAGE, after });
      for (const d of page.devices) {
        if (ids && !ids.has(d.id)) continue;
        if (f.board !== undefined && d.server?.name !== f.board) continue;
        if (f.firmware !== undefined && d.server?.version !== f.firmware) continue;
        out.push(d.id);
      }
      after = page.next;
    } while (after !== undefined);
    return out;
  }
}
