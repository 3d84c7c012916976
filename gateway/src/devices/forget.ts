/** What forgetting a device touches, each a port the root wires (gateway.ts). */
export interface ForgetDeps {
  /** Drops the device from the registry and the records, closing a live connection; false when unknown to both. */
  registry: { forget(deviceId: string): Promise<boolean> };
  /** Whether the device is known anywhere (in a cluster: online on another instance). */
  known(deviceId: string): boolean;
  voiceModes: { get(deviceId: string): unknown; set(deviceId: string, mode: null): Promise<void> };
  /** Enrollment (device auth other than open): revokes the device's credentials. */
  enrollment?: { reenroll(deviceId: string): Promise<boolean> } | undefined;
  /** What other parts keep per device (queued calls, …): each forgets its own. */
  also?: ReadonlyArray<(deviceId: string) => Promise<unknown>>;
}

/**
 * `DELETE /v1/devices/{id}`: the record, the voice mode, the credentials, and what other parts keep for
 * it. False when none of them knew the device.
 */
export function deviceForgetter(d: ForgetDeps): (deviceId: string) => Promise<boolean> {
  return async (deviceId) => {
    const known = d.known(deviceId);
    const hadMode = d.voiceModes.get(deviceId) !== undefined;
    const forgotten = await d.registry.forget(deviceId);
    if (hadMode) await d.voiceModes.set(deviceId, null);
    const revoked = (await d.enrollment?.reenroll(deviceId)) ?? false;
    for (const fn of d.also ?? []) await fn(deviceId);
    return known || forgotten || hadMode || revoked;
  };
}
