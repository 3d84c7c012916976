import { describe, expect, it } from 'vitest';
import { canSee, isOperator, isOwner, mayUseServer, ownerOf } from '../src/principal.js';

describe('principal.ts: who owns what, and who sees what', () => {
  it('owns by principal within a tenant: keys of one tenant, or two operator keys, are strangers', () => {
    const a = { tenant: 'acme', principal: 'key:a' };
    const b = { tenant: 'acme', principal: 'key:b' };
    const owner = ownerOf(a);
    expect(isOwner(owner, a)).toBe(true);
    expect(isOwner(owner, b)).toBe(false);
    expect(isOwner(owner, { principal: 'key:a' })).toBe(false); // the same principal without the tenant
    expect(isOwner(ownerOf({ principal: 'key:x' }), { principal: 'key:y' })).toBe(false);
    expect(isOwner(ownerOf({ principal: 'key:x' }), { principal: 'key:x' })).toBe(true);
  });

  it('lets a caller without a principal own nothing it can find again', () => {
    expect(ownerOf({ tenant: 'acme' })).toBeUndefined();
    expect(isOwner(undefined, { tenant: 'acme' })).toBe(false);
    expect(isOwner(undefined, {})).toBe(false);
  });

  it('keeps tenant names from running into principals', () => {
    // "a" + "\0b" and "a\0" + "b" must not be one owner.
    expect(ownerOf({ tenant: 'a', principal: 'b:c' })).not.toBe(ownerOf({ tenant: 'a:b', principal: 'c' }));
  });

  it('lets an operator see everything, a tenant only its own (nothing without a tenant)', () => {
    expect(canSee({}, undefined)).toBe(true);
    expect(canSee({}, 'acme')).toBe(true);
    expect(canSee({ tenant: 'acme' }, 'acme')).toBe(true);
    expect(canSee({ tenant: 'acme' }, 'globex')).toBe(false);
    expect(canSee({ tenant: 'acme' }, undefined)).toBe(false);
  });

  it('lets a caller limited to what has no tenant (a device without one, conversing) see only that, as no operator', () => {
    expect(canSee({ untenantedOnly: true }, undefined)).toBe(true);
    expect(canSee({ untenantedOnly: true }, 'acme')).toBe(false);
    expect([isOperator({}), isOperator({ untenantedOnly: true }), isOperator({ tenant: 'acme' })]).toEqual([true, false, false]);
  });

  it('serves a hosted MCP server to everyone, or to its listed tenants only (not even operators)', () => {
    expect(mayUseServer({}, undefined)).toBe(true);
    expect(mayUseServer({ tenant: 'acme' }, undefined)).toBe(true);
    expect(mayUseServer({ tenant: 'acme' }, ['acme', 'globex'])).toBe(true);
    expect(mayUseServer({ tenant: 'initech' }, ['acme'])).toBe(false);
    expect(mayUseServer({}, ['acme'])).toBe(false);
    expect(mayUseServer({ tenant: 'acme' }, [])).toBe(false);
  });
});
