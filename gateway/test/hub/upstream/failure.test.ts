import { ProtocolError, SdkError, SdkErrorCode, SdkHttpError } from '@modelcontextprotocol/client';
import { describe, expect, it } from 'vitest';
import { classifyFailure, describeCallFailure, sessionMayBeLost } from '../../../src/hub/upstream/failure.js';
import { RESULT_TOO_LARGE } from '../../../src/hub/stdio-transport.js';

const http = (status: number) =>
  new SdkHttpError(SdkErrorCode.ClientHttpNotImplemented, `Error POSTing to endpoint: ${status}`, { status, statusText: '', text: '' });
const ctx = { server: 's', type: 'http', command: undefined, stderrTail: undefined };

describe('upstream failures, told apart by the SDK’s error classes', () => {
  it('classifies HTTP answers, network failures, timeouts, closes, refusals and oversized answers', () => {
    expect(classifyFailure(http(400))).toEqual({ kind: 'http', status: 400 });
    expect(classifyFailure(http(404))).toEqual({ kind: 'http', status: 404 });
    expect(classifyFailure(http(401))).toEqual({ kind: 'credentials', status: 401 });
    expect(classifyFailure(new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) }))).toEqual({
      kind: 'unreachable',
    });
    expect(classifyFailure(new SdkError(SdkErrorCode.RequestTimeout, 'Request timed out'))).toEqual({ kind: 'timeout' });
    expect(classifyFailure(new SdkError(SdkErrorCode.ConnectionClosed, 'Connection closed'))).toEqual({ kind: 'closed' });
    expect(classifyFailure(new ProtocolError(-32602, 'bad'))).toEqual({ kind: 'rejected', code: -32602 });
    expect(classifyFailure(new ProtocolError(RESULT_TOO_LARGE, 'big'))).toEqual({ kind: 'too_large' });
    // Message text decides nothing: a plain error that says "timed out" is just an error.
    expect(classifyFailure(new Error('timed out'))).toEqual({ kind: 'other' });
  });

  it('takes a 4xx to our session (400 or 404) and an unreachable server as a lost session; not credentials or rate limits', () => {
    expect(sessionMayBeLost({ kind: 'http', status: 400 })).toBe(true);
    expect(sessionMayBeLost({ kind: 'http', status: 404 })).toBe(true);
    expect(sessionMayBeLost({ kind: 'unreachable' })).toBe(true);
    expect(sessionMayBeLost({ kind: 'http', status: 429 })).toBe(false);
    expect(sessionMayBeLost({ kind: 'http', status: 500 })).toBe(false);
    expect(sessionMayBeLost({ kind: 'credentials', status: 401 })).toBe(false);
  });

  it('words each failure for the model, with a stable code', () => {
    expect(describeCallFailure(new SdkError(SdkErrorCode.RequestTimeout, 'x'), ctx, 5000)).toEqual({
      code: 'UPSTREAM_TIMEOUT',
      text: 'The tool server "s" did not answer within 5 s. Try again later.',
    });
    expect(describeCallFailure(http(403), ctx, 5000)).toEqual({
      code: 'UPSTREAM_ERROR',
      text: 'The tool server "s" refused the credentials (HTTP 403): the access token is missing, invalid or expired.',
    });
    expect(describeCallFailure(new ProtocolError(RESULT_TOO_LARGE, 'the answer was 9 bytes'), ctx, 5000).text).toMatch(
      /^The tool server "s" answered with a result too large to pass on: the answer was 9 bytes\. Ask for less/,
    );
    expect(describeCallFailure(new SdkError(SdkErrorCode.ConnectionClosed, 'x'), ctx, 5000).code).toBe('UPSTREAM_UNAVAILABLE');
  });
});
