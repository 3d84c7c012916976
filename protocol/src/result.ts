/** A parse outcome that never throws: parsers at the device boundary return this instead. */
export type Parsed<T, R extends string = string> = { ok: true; value: T } | { ok: false; reason: R; detail: string };

export const ok = <T>(value: T): { ok: true; value: T } => ({ ok: true, value });
export const fail = <R extends string>(reason: R, detail: string): { ok: false; reason: R; detail: string } => ({
  ok: false,
  reason,
  detail,
});

/** Render a zod error as one short line naming each failing path. */
export function describeIssues(issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>): string {
  return issues
    .slice(0, 5)
    .map((i) => `${i.path.length ? i.path.map(String).join('.') : '(root)'}: ${i.message}`)
    .join('; ');
}
