import { GatewayError } from '../errors.js';
import type { DeviceDirectory, DeviceFilter, DevicePage, PageRequest } from './directory.js';
import type { DeviceHandle } from './device-handle.js';

/** Pages read from the directory per step while skipping devices the caller may not see. */
const SCAN_PAGE = 256;

/**
 * The directory as one caller sees it: devices it may not see are absent, exactly as a device that never
 * connected (DEVICE_NOT_FOUND, 404), so a tenant learns nothing of another tenant's devices.
 */
export function scopedDirectory(dir: DeviceDirectory, visible: (deviceId: string) => boolean): DeviceDirectory {
  const hidden = (deviceId: string) => new GatewayError('DEVICE_NOT_FOUND', `no device ${deviceId} has ever connected`);
  return {
    find: (id): DeviceHandle | undefined => (visible(id) ? dir.find(id) : undefined),
    device: (id): DeviceHandle => {
      if (!visible(id)) throw hidden(id);
      return dir.device(id);
    },
    get: (id) => (visible(id) ? dir.get(id) : undefined),
    page: (filter, opts) => visiblePage(dir, filter, opts, visible),
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
