/** Binary searches over a sorted array of ids (the device listing's order, the cluster's presence index). */

/** The index of the first element of sorted `a` not less than `v`. */
export function lowerBound(a: readonly string[], v: string): number {
  return search(a, (x) => x < v);
}

/** The index of the first element of sorted `a` greater than `v`. */
export function upperBound(a: readonly string[], v: string): number {
  return search(a, (x) => x <= v);
}

/** The first index whose element is not `before` (the predicate holds for a prefix of `a`). */
function search(a: readonly string[], before: (x: string) => boolean): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (before(a[mid]!)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
