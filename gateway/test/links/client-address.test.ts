import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { clientAddressOf } from '../../src/links/client-address.js';

/** An upgrade request as the address reader sees it: a socket address and maybe an X-Forwarded-For. */
const req = (remoteAddress: string | undefined, forwardedFor?: string) =>
  ({ headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor }, socket: { remoteAddress } }) as unknown as IncomingMessage;

describe('clientAddressOf: the address of a WebSocket upgrade', () => {
  it('is the socket address when no proxy is trusted (the default), whatever the headers say', () => {
    const of = clientAddressOf([]);
    expect(of(req('10.1.2.3', '198.51.100.1'))).toBe('10.1.2.3');
    expect(of(req(undefined, '198.51.100.1'))).toBe('');
  });

  it('behind a trusted proxy, walks back from the nearest hop while each hop is trusted, as fastify reads req.ip', () => {
    const of = clientAddressOf(['loopback', '10.0.0.0/8']);
    expect(of(req('127.0.0.1', '198.51.100.1'))).toBe('198.51.100.1');
    // The client's own entries before an untrusted hop are not believed.
    expect(of(req('127.0.0.1', '203.0.113.66, 198.51.100.1'))).toBe('198.51.100.1');
    // Two trusted proxies in a row: the entry the outer one added.
    expect(of(req('127.0.0.1', '198.51.100.1, 10.9.9.9'))).toBe('198.51.100.1');
    // From a socket that is not a trusted proxy, the header is ignored.
    expect(of(req('192.0.2.50', '198.51.100.1'))).toBe('192.0.2.50');
    // No header: the proxy's own address.
    expect(of(req('127.0.0.1'))).toBe('127.0.0.1');
  });

  it("counts a forwarded value that is not an IP address as the socket's (a misconfigured proxy)", () => {
    const of = clientAddressOf(['127.0.0.1']);
    for (const bad of ['not-an-address', 'x'.repeat(10_000), '3232235777', ' , ,']) expect(of(req('127.0.0.1', bad))).toBe('127.0.0.1');
    expect(of(req('127.0.0.1', '2001:db8::7'))).toBe('2001:db8::7');
    // node's isIP takes a zone id of any length: an address no proxy forwards, kilobytes in every log line.
    expect(of(req('127.0.0.1', `fe80::1%${'a'.repeat(10_000)}`))).toBe('127.0.0.1');
    expect(of(req('127.0.0.1', '::ffff:198.51.100.7'))).toBe('::ffff:198.51.100.7');
  });
});
