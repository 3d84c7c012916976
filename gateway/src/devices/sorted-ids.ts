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

/** Sorted `a` and sorted `b` as one sorted array (the order `Array.prototype.sort` gives strings). */
export function mergeSorted(a: readonly string[], b: readonly string[]): string[] {
  const out = new Array<string>(a.length + b.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.length && j < b.length) out[k++] = b[j]! < a[i]! ? b[j++]! : a[i++]!;
  while (i < a.length) out[k++] = a[i++]!;
  while (j < b.length) out[k++] = b[j++]!;
  return out;
}
