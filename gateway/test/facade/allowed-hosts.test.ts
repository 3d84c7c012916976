import { describe, expect, it } from 'vitest';
import { hostnameOf, mcpAllowedHosts } from '../../src/facade/allowed-hosts.js';

describe('hostnameOf', () => {
  it('gives the lowercase name of a Host header, with or without a port, and IPv6 in brackets', () => {
    expect(hostnameOf('Gateway.Example:8080')).toBe('gateway.example');
    expect(hostnameOf('localhost')).toBe('localhost');
    expect(hostnameOf('[::1]:3000')).toBe('[::1]');
  });

  it('refuses what is not a Host header: userinfo, a path, a query, empty, or too long', () => {
    for (const bad of ['user@allowed.example', 'allowed.example/path', 'a.example?x=1', 'a.example#f', '', undefined, `${'a'.repeat(300)}.example`, 'a b']) {
      expect(hostnameOf(bad)).toBeUndefined();
    }
  });
});

describe('mcpAllowedHosts', () => {
  it('allows the loopback names and nothing else for a wildcard listen address', () => {
    const hosts = mcpAllowedHosts({ host: '0.0.0.0', publicUrl: undefined }, []);
    expect(hosts.has('localhost')).toBe(true);
    expect(hosts.has('127.0.0.1')).toBe(true);
    expect(hosts.has('0.0.0.0')).toBe(false);
    expect(hosts.has('')).toBe(false);
    expect(mcpAllowedHosts({ host: '::', publicUrl: undefined }, []).has('[::]')).toBe(false);
  });

  it('adds a specific listen address (IPv6 bracketed), the public URL host and the configured names', () => {
    const hosts = mcpAllowedHosts({ host: 'fd00::5', publicUrl: 'https://Voice.Example.com:8443/base' }, ['Extra.Example:9000', 'bad@host']);
    expect(hosts.has('[fd00::5]')).toBe(true);
    expect(hosts.has('voice.example.com')).toBe(true);
    expect(hosts.has('extra.example')).toBe(true);
    expect([...hosts].some((h) => h.includes('@'))).toBe(false);
    expect(mcpAllowedHosts({ host: '192.168.1.10', publicUrl: undefined }, []).has('192.168.1.10')).toBe(true);
  });
});
