import { describe, expect, it } from 'vitest';
import { RequestTarget, trimSlashes } from '../../src/links/request-target.js';

describe('RequestTarget', () => {
  it('splits the path from the query and reads parameters as URLSearchParams does', () => {
    const t = new RequestTarget('/xiaozhi/v1/?device-id=AA%3ABB&client_id=a+b&token=1&token=2');
    expect(t.path).toBe('/xiaozhi/v1/');
    expect(t.query('device-id')).toBe('AA:BB');
    expect(t.query('client_id')).toBe('a b');
    expect(t.query('token')).toBe('1');
    expect(t.query('missing')).toBeNull();
  });

  it('takes the path as sent: no host out of a double slash, no dot segment resolved', () => {
    expect(new RequestTarget('//xiaozhi/v1/').path).toBe('//xiaozhi/v1/');
    expect(new RequestTarget('/xiaozhi/../xiaozhi/v1/').path).toBe('/xiaozhi/../xiaozhi/v1/');
    expect(new RequestTarget(undefined).path).toBe('/');
    expect(new RequestTarget('').path).toBe('/');
    expect(new RequestTarget('/a?').query('a')).toBeNull();
  });

  it('trims trailing slashes, keeping the root', () => {
    expect(trimSlashes('/xiaozhi/v1///')).toBe('/xiaozhi/v1');
    expect(trimSlashes('/xiaozhi/v1')).toBe('/xiaozhi/v1');
    expect(trimSlashes('/')).toBe('/');
    expect(trimSlashes('///')).toBe('/');
  });
});
