import { GatewayError } from '../errors.js';
import { matchesFilter, type DeviceDirectory, type DeviceFilter, type DevicePage, type PageRequest } from './directory.js';
import type { DeviceHandle } from './device-handle.js';
import { upperBound } from './sorted-ids.js';

/** Pages read from the directory per step while skipping devices the caller may not see. */
const SCAN_PAGE = 256;

/**
 * The directory as one caller sees it: devices it may not see are absent, exactly as a device that never
 * connected (DEVICE_NOT_FOUND, 404), so a tenant learns nothing of another tenant's devices. With `own` (a tenant's
 * device ids, sorted: devices/tenants.ts devicesOf), pages read those devices only, not the fleet's pages.
 */
export function scopedDirectory(dir: DeviceDirectory, visible: (deviceId: string) => boolean, own?: () => readonly string[]): DeviceDirectory {
  const hidden = (deviceId: string) => new GatewayError('DEVICE_NOT_FOUND', `no device ${deviceId} has ever connected`);
  return {
    find: (id): DeviceHandle | undefined => (visible(id) ? dir.find(id) : undefined),
    device: (id): DeviceHandle => {
      if (!visible(id)) throw hidden(id);
      return dir.device(id);
    },
    get: (id) => (visible(id) ? dir.get(id) : undefined),
    page: (filter, opts) => (own ? ownPage(dir, own(), filter, opts, visible) : visiblePage(dir, filter, opts, visible)),
    ready: () => dir.ready().filter((d) => visible(d.deviceId)),
    onChange: (fn) => dir.onChange(fn),
  };
}

/** A page of visible devices: reads on through the directory's pages until it has `limit` or there are no more. */
export function visiblePage(dir: Pick<DeviceDirectory, 'page'>, filter: DeviceFilter, opts: PageRequest, visible: (deviceId: string) => boolean): DevicePage {
  const devices: DevicePage['devices'] = [];
  let after = opts.after;
  for (;;) {
    const p = dir.page(filter, { limit: Math.max(opts.limit, SCAN_PAGE), after });
    for (const d of p.devices) {
      if (!visible(d.id)) continue;
      // One more visible device than the page holds: there is a next page, after the last one kept.
      if (devices.length === opts.limit) return { devices, next: devices[devices.length - 1]!.id };
      devices.push(d);
    }
    if (p.next === undefined) return { devices, next: undefined };
    after = p.next;
  }
}

/**
 * The same page as `visiblePage` when `ids` (sorted) are every device the caller may see (a tenant's, from its index):
 * the directory is asked for those devices only, one `get` each, in id order from after the cursor. `get` lists a
 * device exactly when the directory's `page` does (a local record, or a device the cluster knows), with the same summary.
 */
export function ownPage(
  dir: Pick<DeviceDirectory, 'get'>,
  ids: readonly string[],
  filter: DeviceFilter,
  opts: PageRequest,
  visible: (deviceId: string) => boolean,
): DevicePage {
  const devices: DevicePage['devices'] = [];
  for (let i = opts.after === undefined ? 0 : upperBound(ids, opts.after); i < ids.length; i++) {
    const id = ids[i]!;
    if (!visible(id)) continue;
    const d = dir.get(id);
    if (!d || !matchesFilter(d, filter)) continue;
    // One more device than the page holds: there is a next page, after the last one kept.
    if (devices.length === opts.limit) return { devices, next: devices[devices.length - 1]!.id };
    devices.push(d);
  }
  return { devices, next: undefined };
}
