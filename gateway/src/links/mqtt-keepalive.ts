export interface KeepaliveBounds {
  minSeconds: number;
  maxSeconds: number;
}

/**
 * The keepalive the link holds a client to (it closes a client silent for 1.5x this). 0 asks for no
 * keepalive at all, which would keep a half-open socket, and its device "online", forever: it gets the
 * maximum, as does anything above it. Below the minimum, a ping a moment late on a busy gateway would
 * drop the device, so the timer gets the minimum.
 */
export function boundKeepalive(seconds: number | undefined, b: KeepaliveBounds): number {
  if (!seconds) return b.maxSeconds;
  return Math.min(b.maxSeconds, Math.max(b.minSeconds, seconds));
}
