import { describe, expect, it } from 'vitest';
import { GatewayError } from '../../src/errors.js';
import { toToolResult } from '../../src/hub/tool-result.js';

describe('toToolResult', () => {
  it('says an offline device may be asleep, and carries the code', () => {
    const r = toToolResult(new GatewayError('DEVICE_OFFLINE', 'device 02:00:00:00:00:01 is offline'));
    expect(r).toEqual({
      content: [{ type: 'text', text: 'device 02:00:00:00:00:01 is offline. It may be asleep or out of range; try again when it is back online.' }],
      isError: true,
      _meta: { 'voxgate/code': 'DEVICE_OFFLINE' },
    });
  });

  it('says a timed-out device did not answer in time', () => {
    const r = toToolResult(new GatewayError('DEVICE_TIMEOUT', 'device d did not answer tools/call within 300 ms'));
    expect(r.content).toEqual([{ type: 'text', text: 'device d did not answer tools/call within 300 ms. The device did not answer in time.' }]);
    expect(r._meta).toEqual({ 'voxgate/code': 'DEVICE_TIMEOUT' });
  });

  it('passes other domain errors on as their own sentence', () => {
    const r = toToolResult(new GatewayError('TOOL_NOT_FOUND', 'no tool named x'));
    expect(r).toEqual({ content: [{ type: 'text', text: 'no tool named x' }], isError: true, _meta: { 'voxgate/code': 'TOOL_NOT_FOUND' } });
  });

  it('says "the call failed" for anything else, with no code', () => {
    expect(toToolResult(new Error('socket hang up'))).toEqual({ content: [{ type: 'text', text: 'the call failed: socket hang up' }], isError: true });
    expect(toToolResult('plain text')).toMatchObject({ content: [{ type: 'text', text: 'the call failed: plain text' }], isError: true });
    expect(toToolResult(undefined).content).toEqual([{ type: 'text', text: 'the call failed: undefined' }]);
  });
});
