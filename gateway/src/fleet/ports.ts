import type { DeviceHandle } from '../devices/device-handle.js';
import type { JobFilter } from './types.js';

/**
 * The ports the fleet is built on, each as small as its use: the composition root (gateway.ts) plugs in
 * the real parts, the tests plug in fakes.
 */

/** Where a queued call is delivered: the device, when it is connected to THIS instance and ready; else undefined. */
export interface CallPort {
  readyHere(deviceId: string): Pick<DeviceHandle, 'call'> | undefined;
  /** The device's tenant now (devices/tenants.ts); absent: no tenancy (every call is an operator's). */
  tenantOf?(deviceId: string): string | undefined;
}

/** Which devices a job's filter selects, online or not (the registry's lasting records). */
export interface DeviceSelector {
  select(filter: JobFilter): Promise<string[]>;
}
