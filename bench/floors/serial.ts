/**
 * The floors' per-device queue for the "one device, many callers" rows: the gateway runs one call at a time per
 * device (as the firmware does), so its floor must too, or it would pipeline what the gateway may not.
 * `/serial/v1/devices/…` routes send a device's next call only when its previous reply is in; `/v1/…` pipeline.
 */
const queues = new Map<string, Array<() => void>>();

/** Run `send` now if the device has no call in flight, else after the ones before it. */
export function serially(deviceId: string, send: () => void): void {
  const q = queues.get(deviceId);
  if (q) q.push(send);
  else {
    queues.set(deviceId, []);
    send();
  }
}

/** A serial call's reply is in: send the device's next one. */
export function nextCall(deviceId: string): void {
  const q = queues.get(deviceId);
  const send = q?.shift();
  if (send) send();
  else queues.delete(deviceId);
}
