/**
 * Same value, same own keys in the same order at every level, same prototypes: what a hand-written fast path must
 * give to stand in for the SDK's parse. (Not `toStrictEqual`: it compares `constructor` properties, and an own
 * `constructor` of NaN on both sides reads as a difference.)
 */
export function identical(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  const ka = Reflect.ownKeys(a);
  const kb = Reflect.ownKeys(b);
  if (ka.length !== kb.length || ka.some((k, i) => k !== kb[i])) return false;
  return ka.every((k) => identical((a as Record<PropertyKey, unknown>)[k], (b as Record<PropertyKey, unknown>)[k]));
}
