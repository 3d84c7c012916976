import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import proxyAddr from '@fastify/proxy-addr';

/**
 * The address a WebSocket upgrade came from: its socket's, or behind a proxy listed in `http.trustProxy` the
 * `X-Forwarded-For` entry that proxy vouches for, read as fastify reads it for HTTP requests (`req.ip`, the same
 * library): from the nearest hop back while each hop is trusted. Device and tool connections then carry the
 * address their logs, the refused list, the per-address frame budget and the voice server's `X-Forwarded-For` want,
 * not the proxy's. What a trusted proxy forwards that is not an IP address (a misconfigured chain), or is longer than
 * any address, counts as the socket's address. The default trusts nobody: a client cannot choose its address.
 */
export function clientAddressOf(trustProxy: readonly string[]): (req: IncomingMessage) => string {
  if (trustProxy.length === 0) return socketAddress;
  const trusted = proxyAddr.compile([...trustProxy]);
  return (req) => {
    const forwarded = proxyAddr(req, trusted);
    return forwarded.length <= MAX_ADDRESS && isIP(forwarded) !== 0 ? forwarded : socketAddress(req);
  };
}

/**
 * The longest address text, an IPv4-mapped IPv6 one in full (`ffff:…:255.255.255.255`) and a short zone id. node's
 * isIP takes a zone id of any length, and the address is in every log line of the device and in the refused list.
 */
const MAX_ADDRESS = 64;

const socketAddress = (req: IncomingMessage): string => req.socket.remoteAddress ?? '';
