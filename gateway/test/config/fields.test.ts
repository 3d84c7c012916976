import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Bool, Count, Csv, declaredSettings, documented, env, HttpUrl, isPlain, Ms, Port, Tenant } from '../../src/config/fields.js';

describe('shared config field types', () => {
  it('Port takes 0-65535 from a number or a variable, and nothing else', () => {
    expect(Port.parse('8000')).toBe(8000);
    expect(Port.parse(0)).toBe(0);
    for (const bad of ['70000', '-1', '80.5', 'eighty']) expect(Port.safeParse(bad).success).toBe(false);
  });

  it('Ms and Count have their default, a floor of 1 and a ceiling', () => {
    expect(Ms(500).parse(undefined)).toBe(500);
    expect(Ms(500).parse('250')).toBe(250);
    expect(Ms(500).safeParse('0').success).toBe(false);
    expect(Ms(500).safeParse(3_600_001).success).toBe(false);
    expect(Ms(500, 1000).safeParse(1001).success).toBe(false);
    expect(Count(8).parse(undefined)).toBe(8);
    expect(Count(8).safeParse(10_000_001).success).toBe(false);
  });

  it('Csv splits a variable on commas, trims and drops empty items; a list in the file passes as is', () => {
    expect(Csv.parse('a, b ,,c')).toEqual(['a', 'b', 'c']);
    expect(Csv.parse(['x'])).toEqual(['x']);
    expect(Csv.parse('')).toEqual([]);
    expect(Csv.safeParse(['']).success).toBe(false);
  });

  it('Bool takes true/false and 1/0, and refuses other words', () => {
    expect([Bool.parse('true'), Bool.parse('1'), Bool.parse('false'), Bool.parse('0'), Bool.parse(true)]).toEqual([true, true, false, false, true]);
    expect(Bool.safeParse('yes').success).toBe(false);
  });

  it('HttpUrl takes http and https only; Tenant is 1-64 letters, digits, _ . -', () => {
    expect(HttpUrl.safeParse('https://example.com/x').success).toBe(true);
    expect(HttpUrl.safeParse('ftp://example.com').success).toBe(false);
    expect(Tenant.safeParse('acme_1.eu-west').success).toBe(true);
    const bad = Tenant.safeParse('bad tenant!');
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0]?.message).toBe('a tenant is 1-64 letters, digits, _ . -');
    expect(Tenant.safeParse('x'.repeat(65)).success).toBe(false);
  });

  it('isPlain is true for plain objects only', () => {
    expect([isPlain({}), isPlain([]), isPlain(null), isPlain('x')]).toEqual([true, false, false, false]);
  });
});

describe('declaredSettings', () => {
  it('finds every declared field in schema order, through defaults, optionals, preprocessing, lists and nested objects', () => {
    const schema = z.object({
      http: z.object({ port: env('GATEWAY_HTTP_PORT', Port.default(8000), 'listen port'), host: z.string().default('0.0.0.0') }),
      keys: env(['GATEWAY_API_KEYS', 'GATEWAY_API_KEY'], Csv.optional(), 'API keys', 'generated once'),
      servers: z.array(z.object({ url: documented(HttpUrl, 'where the server is') })).default([]),
    });
    expect(declaredSettings(schema)).toEqual([
      { path: ['http', 'port'], env: ['GATEWAY_HTTP_PORT'], doc: 'listen port' },
      { path: ['keys'], env: ['GATEWAY_API_KEYS', 'GATEWAY_API_KEY'], doc: 'API keys', shown: 'generated once' },
      { path: ['servers', 'url'], env: [], doc: 'where the server is' },
    ]);
  });

  it('lists an undeclared schema as nothing, and env() returns the schema it was given', () => {
    expect(declaredSettings(z.object({ a: z.string() }))).toEqual([]);
    const s = z.string();
    expect(env('X', s)).toBe(s);
  });
});
