/** Binary searches over a sorted array of ids (the device listing's order, the cluster's presence index), and sorted id lists kept per key (a device's queued calls). */

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

/**
 * A set of ids kept in id order: added ids wait unsorted and are merged in at the next read (a load of many adds, or a
 * fleet dialling in, pays one sort, not a sorted insert each); a delete merges first, then takes the id out in
 * O(log n) + a splice. The registry's known devices and each tenant's (tenants.ts) are kept in one.
 * The caller adds an id only when it is not there (the tenancy's index knows which set holds an id).
 */
export class SortedIds {
  private order: string[] = [];
  private added: string[] = [];

  add(id: string): void {
    this.added.push(id);
  }

  delete(id: string): boolean {
    const order = this.merged();
    const at = lowerBound(order, id);
    if (order[at] !== id) return false;
    order.splice(at, 1);
    return true;
  }

  /** Takes every id in `gone` out in one pass. */
  deleteAll(gone: ReadonlySet<string>): void {
    this.order = this.merged().filter((id) => !gone.has(id));
  }

  /** Every id, sorted: read it synchronously (a later add or delete changes it). */
  sorted(): readonly string[] {
    return this.merged();
  }

  private merged(): string[] {
    if (this.added.length > 0) {
      this.order = mergeSorted(this.order, this.added.sort());
      this.added = [];
    }
    return this.order;
  }

  get size(): number {
    return this.order.length + this.added.length;
  }
}

/** Adds `id` to the sorted ids `m` keeps under `key` (appended when it sorts last, as new ids mostly do). */
export function insertSorted(m: Map<string, string[]>, key: string, id: string): void {
  let ids = m.get(key);
  if (!ids) m.set(key, (ids = []));
  if (ids.length === 0 || ids[ids.length - 1]! < id) ids.push(id);
  else ids.splice(upperBound(ids, id), 0, id);
}

/** Takes `id` out of the sorted ids `m` keeps under `key`; the key goes with its last id. */
export function removeSorted(m: Map<string, string[]>, key: string, id: string): void {
  const ids = m.get(key);
  if (!ids) return;
  const i = ids[0] === id ? 0 : ids.indexOf(id);
  if (i >= 0) ids.splice(i, 1);
  if (ids.length === 0) m.delete(key);
}
