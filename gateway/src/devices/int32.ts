import type { ArgumentProblem } from '../schemas/validators.js';

const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;

/**
 * The firmware keeps integer arguments in a C `int` (cJSON `valueint` saturates, and its range checks
 * compare the saturated value), so 2^31 would silently become 2147483647. For a device tool whose schema
 * says `integer`, a value outside int32 is refused before it is sent. Firmware schemas are flat.
 */
export function int32Problems(inputSchema: Record<string, unknown>, args: Record<string, unknown>): ArgumentProblem[] | undefined {
  const properties = inputSchema['properties'];
  if (typeof properties !== 'object' || properties === null) return undefined;
  // Every call passes here: no keys or entries array, and the problems list only when there is one.
  let problems: ArgumentProblem[] | undefined;
  for (const name in args) {
    if (!Object.hasOwn(args, name)) continue;
    const value = args[name];
    if (typeof value !== 'number' || (value >= INT32_MIN && value <= INT32_MAX)) continue;
    const prop: unknown = Object.hasOwn(properties, name) ? (properties as Record<string, unknown>)[name] : undefined;
    const type = typeof prop === 'object' && prop !== null ? (prop as { type?: unknown }).type : undefined;
    const integer = type === 'integer' || (Array.isArray(type) && type.includes('integer'));
    if (integer) (problems ??= []).push({ argument: name, message: `must be a 32-bit integer (${INT32_MIN} to ${INT32_MAX}): the device stores it in an int` });
  }
  return problems;
}
