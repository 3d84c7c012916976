import ipaddr from 'ipaddr.js';

/**
 * Who a connection counts against. One IPv6 subscriber usually holds a whole /64, so an address
 * inside it is no new party; an IPv4-mapped IPv6 address is the IPv4 address it maps.
 */
export function sourceKey(remoteAddress: string | undefined): string {
  if (!remoteAddress) return 'unknown';
  // A fleet dials in from few addresses (NATs, one LAN): the last answer is kept, as parsing the address twice per
  // connection (open and close) was most of connection-limits.ts' cost in the ready path's profile.
  if (remoteAddress === lastSource.address) return lastSource.key;
  const key = parseSourceKey(remoteAddress);
  lastSource = { address: remoteAddress, key };
  return key;
}
let lastSource = { address: '', key: '' };

function parseSourceKey(remoteAddress: string): string {
  try {
    const a = ipaddr.process(remoteAddress);
    if (a.kind() === 'ipv4') return a.toString();
    return `${(a as ipaddr.IPv6).parts
      .slice(0, 4)
      .map((p) => p.toString(16))
      .join(':')}::/64`;
  } catch {
    return remoteAddress;
  }
}
