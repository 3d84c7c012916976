import { NO_META } from './record-shapes.js';
import type { DeviceRecords } from './records.js';

export interface RecordFields {
  name: string | null;
  room: string | null;
  tags: string[];
  tenant: string | null;
  board: string | null;
  /** The firmware version recorded (initialize's serverInfo.version, else the OTA report). */
  firmware: string | null;
  firstSeenAt: string;
}

/** The record's part of a listing; a device not recorded (no store yet) has none, and was first seen at `fallbackFirstSeen`. */
export function recordFields(records: DeviceRecords | undefined, deviceId: string, fallbackFirstSeen: string): RecordFields {
  const f = records?.getFacts(deviceId);
  const m = records?.getMeta(deviceId) ?? NO_META;
  return {
    name: m.name,
    room: m.room,
    tags: [...m.tags],
    tenant: m.tenant,
    board: f?.board ?? null,
    firmware: f?.firmware ?? null,
    firstSeenAt: f ? new Date(f.firstSeen).toISOString() : fallbackFirstSeen,
  };
}
