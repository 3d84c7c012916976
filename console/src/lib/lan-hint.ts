/**
 * When the console was opened on the gateway's own host as localhost, the OTA URL it would hand out
 * (this page's origin) is a loopback address no device can reach. The hint names the host and an example
 * of the URL to use with the machine's LAN address. No DOM: unit-tested in Node.
 */
export function loopbackHint(pageUrl: string): { host: string; example: string } | undefined {
  let url: URL;
  try {
    url = new URL(pageUrl);
  } catch {
    return undefined;
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!isLoopback(host)) return undefined;
  const example = new URL('/xiaozhi/ota/', url.origin);
  example.hostname = '192.168.1.20';
  return { host: url.hostname, example: example.href };
}

export function isLoopback(host: string): boolean {
  const h = host.toLowerCase();
  return h === 'localhost' || h.endsWith('.localhost') || /^127\.\d+\.\d+\.\d+$/.test(h) || h === '::1' || h === '0.0.0.0' || h === '::';
}
