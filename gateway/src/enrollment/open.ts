import { normalizeDeviceId } from '@voxgate/protocol';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics.js';
import type { Store } from '../store/store.js';
import type { EnrollmentConfig } from './config.js';
import { EnrollmentCredentials } from './credentials.js';
import { Enrollment, type EnrolledRecords } from './enrollment.js';

export interface EnrollmentDeps {
  deviceSecret: string;
  /** The MQTT client-id group minted credentials carry (`mqtt.group`). */
  mqttGroup: string;
  store: Store;
  log: Logger;
  metrics: Metrics;
  /** Revoked credentials must not keep a live connection: close the device's. */
  onRevoked: (deviceId: string) => void;
  /** The device records: enrollments of ids that never connected are bounded (enrollment.maxUnconnected). */
  records?: EnrolledRecords | undefined;
  /** An enrollment dropped past that bound: what else is kept for the id (its tenant) goes too. */
  onDropped?: ((deviceId: string) => void) | undefined;
}

/** Which devices may get credentials (hmac or token device auth), with its records loaded from the store. */
export async function openEnrollment(d: EnrollmentDeps, e: EnrollmentConfig): Promise<Enrollment> {
  const enrollment = await Enrollment.open({
    policy: e.policy,
    allowlist: new Set(e.allowlist.map((id) => normalizeDeviceId(id)!)),
    pendingTtlSeconds: e.pendingTtlSeconds,
    maxPending: e.maxPending,
    maxPendingPerDevice: e.maxPendingPerDevice,
    maxPendingPerAddress: e.maxPendingPerAddress ?? Math.ceil(e.maxPending / 4),
    credentials: new EnrollmentCredentials(d.deviceSecret, d.mqttGroup),
    store: d.store,
    log: d.log.child({ component: 'enrollment' }),
    metrics: d.metrics,
    onRevoked: d.onRevoked,
    maxUnconnected: e.maxUnconnected,
    onDropped: d.onDropped,
  });
  if (d.records) enrollment.followRecords(d.records);
  d.log.info({ policy: e.policy }, 'device enrollment');
  return enrollment;
}
