import { createHash } from 'node:crypto';

/** What LLM providers accept as a function name (OpenAI, Anthropic). */
export const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const MAX = 64;
const HASH_LEN = 6;

export type ToolTarget =
  | { kind: 'server'; server: string; tool: string }
  | { kind: 'device'; deviceId: string; tool: string }
  | { kind: 'generic'; tool: 'devices_list' | 'device_call' };

/** `aa:bb:cc:dd:ee:ff` → `aabbccddeeff`: shorter, and already clean. */
export function compactDeviceId(id: string): string {
  return id.replace(/[^A-Za-z0-9]/g, '').toLowerCase();
}

export function cleanPart(s: string): string {
  return s.replace(/[^A-Za-z0-9_-]/g, '_');
}

function hash(s: string): string {
  return createHash('sha256')
    .update(s)
    .digest('base64url')
    .replace(/[^A-Za-z0-9]/g, '')
    .slice(0, HASH_LEN)
    .toLowerCase();
}

function withSuffix(base: string, original: string, salt = 0): string {
  const h = hash(salt ? `${original}#${salt}` : original);
  return `${base.slice(0, MAX - HASH_LEN - 1)}_${h}`;
}

/**
 * Build one namespace from the raw names: `mcp__{server}__{tool}`, `device__{device}__{tool}`. A name that
 * is valid and unique as it stands is kept; one that cleaning changed and that would collide, or one over 64
 * characters, gets `_` + a 6-character hash of its raw name. Raw names are processed in a fixed order
 * (untouched names first, then sorted), so the same set always yields the same names.
 */
export function buildNamespace(entries: Array<{ raw: string; target: ToolTarget }>): Map<string, ToolTarget> {
  const out = new Map<string, ToolTarget>();
  const cleaned = entries.map((e) => ({ ...e, clean: cleanPart(e.raw) }));
  const untouched = (c: (typeof cleaned)[number]) => c.clean === c.raw && c.raw.length <= MAX;
  const ordered = [...cleaned.filter(untouched).sort(byRaw), ...cleaned.filter((c) => !untouched(c)).sort(byRaw)];
  for (const c of ordered) {
    let name = c.clean.length <= MAX ? c.clean : withSuffix(c.clean, c.raw);
    for (let salt = 1; out.has(name); salt++) name = withSuffix(c.clean, c.raw, salt === 1 ? 0 : salt);
    out.set(name, c.target);
  }
  return out;
}

const byRaw = (a: { raw: string }, b: { raw: string }) => (a.raw < b.raw ? -1 : a.raw > b.raw ? 1 : 0);

export function serverToolRaw(server: string, tool: string): string {
  return `mcp__${server}__${tool}`;
}

export function deviceToolRaw(deviceId: string, tool: string): string {
  return `device__${compactDeviceId(deviceId)}__${tool}`;
}

/**
 * A hosted server's key in the hub when a tenant owns it (an MCP endpoint made for a tenant): `<tenant>/<name>`.
 * Each tenant names its servers in a namespace of its own, so one tenant's "weather" neither blocks, reveals nor
 * shadows another's. A server name never holds `/` (SERVER_NAME), so a key of this shape is never a configured
 * server's name; servers without an owner (configured ones, operators' endpoints) keep their name as their key.
 */
export function serverKey(tenant: string | undefined, name: string): string {
  return tenant === undefined ? name : `${tenant}/${name}`;
}

/** The name a server is shown and namespaced by (its key without the owner's tenant). */
export function shownServerName(key: string): string {
  return key.slice(key.indexOf('/') + 1);
}
