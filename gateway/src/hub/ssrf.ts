import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import type { Agent, fetch as undiciFetch, RequestInit as UndiciRequestInit } from 'undici';

/**
 * The SSRF guard for every outbound request the hub makes on a caller's behalf (OpenAPI tools; HTTP/SSE
 * MCP servers). Private, loopback, link-local, CGNAT, multicast and metadata ranges are refused unless the
 * server's configuration allows them. The check runs inside the socket's DNS lookup, on every address the
 * name resolves to, so the address that is checked is the address that is connected to (no
 * check-then-use race). IP literals are checked before connecting. Redirects are not followed.
 */
const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  blocked.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  ['64:ff9b::', 96],
] as const)
  blocked.addSubnet(net, prefix, 'ipv6');

export class SsrfError extends Error {
  constructor(
    readonly host: string,
    readonly address: string,
  ) {
    super(
      `refused to connect to ${host} (${address}): private, loopback and link-local addresses are blocked; set "allow_private_network": true for this server to allow them`,
    );
    this.name = 'SsrfError';
  }
}

/** True when the address is in a blocked range (IPv4-mapped IPv6 is checked as IPv4). */
export function isBlockedAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return true;
  if (family === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    if (mapped) return blocked.check(mapped[1]!, 'ipv4');
    return blocked.check(address, 'ipv6');
  }
  return blocked.check(address, 'ipv4');
}

/** A `lookup` for http(s).request that fails when any resolved address is blocked. */
export function guardedLookup(): LookupFunction {
  return ((hostname: string, options: object, callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void) => {
    dnsLookup(hostname, { ...(options as object), all: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const list = addresses as LookupAddress[];
      const bad = list.find((a) => isBlockedAddress(a.address));
      if (bad) return callback(new SsrfError(hostname, bad.address) as NodeJS.ErrnoException, '', 0);
      if ((options as { all?: boolean }).all) return callback(null, list);
      const first = list[0];
      if (!first) return callback(new Error(`${hostname} did not resolve`) as NodeJS.ErrnoException, '', 0);
      callback(null, first.address, first.family);
    });
  }) as LookupFunction;
}

export interface OutboundRequest {
  method: string;
  headers: Record<string, string>;
  body?: string | Buffer;
  timeoutMs: number;
  maxResponseBytes: number;
  allowPrivateNetwork: boolean;
  signal?: AbortSignal;
}

export interface OutboundResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  truncated: boolean;
}

/** One HTTP request through the guard, with a timeout and a response size cap. */
export function guardedRequest(url: URL, req: OutboundRequest): Promise<OutboundResponse> {
  return new Promise((resolve, reject) => {
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (!req.allowPrivateNetwork && isIP(host) !== 0 && isBlockedAddress(host)) return reject(new SsrfError(host, host));
    const mod = url.protocol === 'https:' ? https : http;
    const r = mod.request(
      url,
      {
        method: req.method,
        headers: req.headers,
        ...(req.allowPrivateNetwork ? {} : { lookup: guardedLookup() }),
        timeout: req.timeoutMs,
        ...(req.signal ? { signal: req.signal } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        let truncated = false;
        res.on('data', (c: Buffer) => {
          if (truncated) return;
          size += c.length;
          if (size > req.maxResponseBytes) {
            truncated = true;
            chunks.push(c.subarray(0, c.length - (size - req.maxResponseBytes)));
            res.destroy();
            finish();
            return;
          }
          chunks.push(c);
        });
        const finish = () => {
          const headers: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
          resolve({ status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks), truncated });
        };
        res.on('end', finish);
        res.on('error', (e) => (truncated ? undefined : reject(e)));
      },
    );
    r.on('timeout', () => r.destroy(new Error(`no answer within ${req.timeoutMs} ms`)));
    r.on('error', reject);
    if (req.body !== undefined) r.end(req.body);
    else r.end();
  });
}

/**
 * undici, loaded on the first fetch to an HTTP upstream (a gateway without one never holds it, ~6 MiB), with the
 * dispatcher every guarded connection uses: it resolves the host through `guardedLookup`, so the checked
 * address is the one used.
 */
let undici: Promise<{ fetch: typeof undiciFetch; guardedDispatcher: Agent }> | undefined;
const loadUndici = () =>
  (undici ??= import('undici').then(
    (u) => ({ fetch: u.fetch, guardedDispatcher: new u.Agent({ connect: { lookup: guardedLookup() } }) }),
    (e: unknown) => {
      undici = undefined;
      throw new Error(`the HTTP client (undici) could not be loaded: ${e instanceof Error ? e.message : String(e)}`);
    },
  ));

/** The dispatcher guarded fetches use (undici loads on first use). */
export const guardedDispatcher = async (): Promise<Agent> => (await loadUndici()).guardedDispatcher;

/**
 * A `fetch` for the SDK's HTTP client transports (Streamable HTTP and SSE). The host is checked up front for a
 * clear error, and again inside each connection's own DNS lookup (undici's `connect.lookup`), so a name that
 * re-resolves to a private address between the two (DNS rebinding) is still refused.
 */
export function guardedFetch(allowPrivateNetwork: boolean, headers: () => Record<string, string>): typeof fetch {
  return async (input, init) => {
    const request = input instanceof Request ? input : undefined;
    const url = new URL(request ? request.url : String(input));
    if (!allowPrivateNetwork) await assertPublicHost(url.hostname.replace(/^\[|\]$/g, ''));
    const h = new Headers(init?.headers ?? request?.headers);
    for (const [k, v] of Object.entries(headers())) h.set(k, v);
    const options: UndiciRequestInit = { ...(init as UndiciRequestInit), headers: Object.fromEntries(h), redirect: 'manual' };
    if (request && init?.method === undefined) options.method = request.method;
    if (request && init?.body === undefined && request.body) options.body = Buffer.from(await request.arrayBuffer());
    if (request && init?.signal === undefined) options.signal = request.signal;
    const u = await loadUndici();
    if (!allowPrivateNetwork) options.dispatcher = u.guardedDispatcher;
    return (await u.fetch(url, options)) as unknown as Response;
  };
}

export async function assertPublicHost(host: string): Promise<void> {
  if (isIP(host) !== 0) {
    if (isBlockedAddress(host)) throw new SsrfError(host, host);
    return;
  }
  const addresses = await new Promise<LookupAddress[]>((resolve, reject) => dnsLookup(host, { all: true }, (e, a) => (e ? reject(e) : resolve(a))));
  const bad = addresses.find((a) => isBlockedAddress(a.address));
  if (bad) throw new SsrfError(host, bad.address);
}
