/**
 * A "." or ".." path segment, also percent-encoded: fetch resolves it, so an id of ".." from a crafted link
 * (`#/devices/..`, which encodeURIComponent leaves as is) would send the request, and a tool form's call, to another route.
 */
const DOT_SEGMENT = /(?:^|\/)(?:\.|%2e){1,2}(?:[/?#]|$)/i;

/** Whether the path (its query and fragment aside) has a "." or ".." segment: `api()` refuses it before any request. */
export function hasDotSegment(path: string): boolean {
  return DOT_SEGMENT.test(path.split(/[?#]/, 1)[0]!);
}
