import type { HubTool } from '../hub/hub.js';
import { cleanPart } from '../hub/names.js';
import { withoutDialect } from '../schemas/untrusted-schema.js';
import type { ToolSpec } from './types.js';

export type ToolScope = 'all' | 'devices' | 'none';

/** The tools one turn offers, and how each name the model uses maps back to the hub. */
export interface Toolset {
  specs: ToolSpec[];
  /** Model-facing name → the hub tool. */
  byName: Map<string, HubTool>;
}

const MAX_NAME = 64;

/**
 * From the caller's namespace (the hub already leaves out user-only device tools and other tenants'
 * servers): `devices` keeps device tools, `none` keeps nothing. A turn bound to a device offers that
 * device's tools first, under short names (`self_audio_speaker_set_volume`), then the rest.
 */
export function buildToolset(all: readonly HubTool[], scope: ToolScope, boundDevice?: string): Toolset {
  const byName = new Map<string, HubTool>();
  const specs: ToolSpec[] = [];
  if (scope === 'none') return { specs, byName };
  const offered = scope === 'devices' ? all.filter((t) => t.source.kind !== 'server') : [...all];
  const isBound = (t: HubTool) => boundDevice !== undefined && t.source.kind === 'device' && t.source.deviceId === boundDevice;
  const reserved = new Set(offered.filter((t) => !isBound(t)).map((t) => t.name));
  const add = (name: string, t: HubTool) => {
    byName.set(name, t);
    // The providers' tool parameters take the dialect as given; a hosted server's `$schema` is not sent to them.
    specs.push({ name, description: t.description, parameters: withoutDialect(t.inputSchema) });
  };
  for (const t of offered.filter(isBound)) {
    const base = cleanPart((t.source as { tool: string }).tool).slice(0, MAX_NAME);
    let name = base;
    for (let n = 2; byName.has(name) || reserved.has(name) || !name; n++) name = `${base.slice(0, MAX_NAME - 1 - String(n).length)}_${n}`;
    add(name, { ...t, description: t.description.replace(/^\[device [^\]]*\] /, '') });
  }
  for (const t of offered) if (!isBound(t)) add(t.name, t);
  return { specs, byName };
}

/**
 * A tool whose use needs a person's yes: annotated destructive, or listed (by any of its names). Through
 * the generic `device_call`, the device tool it names counts.
 */
export function needsConfirmation(name: string, t: HubTool, listed: readonly string[], args: Record<string, unknown> = {}): boolean {
  if (t.annotations?.['destructiveHint'] === true) return true;
  const src = t.source.kind === 'generic' ? (typeof args['tool'] === 'string' ? args['tool'] : undefined) : t.source.tool;
  return listed.includes(name) || listed.includes(t.name) || (src !== undefined && listed.includes(src));
}

/**
 * Whether a call needs a person's yes, decided on where it lands: the name the model used and the tool it
 * was offered (so `device_call` itself can be listed), and the target the hub resolved for it now (a
 * device tool reached through `device_call` brings its own `destructiveHint` and names).
 */
export function callNeedsConfirmation(name: string, offered: HubTool, target: HubTool, listed: readonly string[], args: Record<string, unknown>): boolean {
  return needsConfirmation(name, offered, listed, args) || needsConfirmation(target.name, target, listed);
}

/**
 * The argument an auto-context tool gets the user's message in: its single required string parameter,
 * or one named query / q / text. Undefined: no mapping fits (the tool is skipped).
 */
export function autoContextArgument(schema: Record<string, unknown>): string | undefined {
  const props = (schema['properties'] ?? {}) as Record<string, { type?: unknown } | undefined>;
  const required = Array.isArray(schema['required']) ? (schema['required'] as unknown[]).filter((r): r is string => typeof r === 'string') : [];
  const isString = (k: string) => props[k]?.type === 'string' || (Array.isArray(props[k]?.type) && (props[k]!.type as unknown[]).includes('string'));
  if (required.length === 1 && isString(required[0]!)) return required[0];
  if (required.length > 1) return undefined;
  return ['query', 'q', 'text'].find((k) => k in props && isString(k));
}
