import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import { describe, expect, it } from 'vitest';
import { GatewayError } from '../../src/errors.js';
import { toProtocolError } from '../../src/facade/protocol-error.js';

describe('toProtocolError', () => {
  it('answers "invalid params" for a tool, resource or prompt that does not exist', () => {
    for (const code of ['NOT_FOUND', 'TOOL_NOT_FOUND'] as const) {
      const e = toProtocolError(new GatewayError(code, 'no tool named x'));
      expect(e).toBeInstanceOf(ProtocolError);
      expect((e as ProtocolError).code).toBe(ProtocolErrorCode.InvalidParams);
      expect((e as Error).message).toContain('no tool named x');
    }
  });

  it('answers "internal error" with the same sentence for any other domain error', () => {
    const e = toProtocolError(new GatewayError('DEVICE_OFFLINE', 'device d is offline')) as ProtocolError;
    expect(e).toBeInstanceOf(ProtocolError);
    expect(e.code).toBe(ProtocolErrorCode.InternalError);
    expect(e.message).toContain('device d is offline');
  });

  it('passes anything else through unchanged', () => {
    const plain = new Error('x');
    expect(toProtocolError(plain)).toBe(plain);
    const already = new ProtocolError(ProtocolErrorCode.MethodNotFound, 'nope');
    expect(toProtocolError(already)).toBe(already);
  });
});
