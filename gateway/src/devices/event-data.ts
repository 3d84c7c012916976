import { safeJsonText } from '@voxgate/protocol';

/** Device-sent data in events is bounded: the ring buffer and every subscriber hold it. */
export const MAX_EVENT_DATA_BYTES = 8 * 1024;

/** The value itself when small enough for an event, else a note of its size (and its `type`, if any). */
export function capForEvent(value: unknown, knownBytes?: number): unknown {
  // Frames are depth-bounded before parsing; the guarded stringify is the second line of defence.
  const bytes = knownBytes ?? safeJsonText(value, '').length;
  if (bytes === 0) return { truncated: true, unserializable: true };
  if (bytes <= MAX_EVENT_DATA_BYTES) return value;
  const type = typeof value === 'object' && value !== null && 'type' in value ? value.type : undefined;
  return { truncated: true, bytes, ...(typeof type === 'string' ? { type } : {}) };
}
