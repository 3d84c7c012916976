import Fastify, { LogController, type FastifyBaseLogger } from 'fastify';
import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { lazyChildLogger, requestLoggers } from '../../src/api/request-logger.js';

/** A pino logger whose lines are kept, and a count of the children made from it. */
function recording(level: pino.Level = 'info') {
  const lines: Array<Record<string, unknown>> = [];
  const log = pino({ level, redact: ['token'] }, { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) });
  const child = vi.spyOn(log, 'child');
  return { log: log as unknown as FastifyBaseLogger, lines, child };
}

describe('lazyChildLogger', () => {
  it('makes no child for a request that logs nothing at an enabled level', () => {
    const { log, lines, child } = recording('info');
    const l = lazyChildLogger(log, { reqId: 'r1' }, {});
    l.debug('not enabled');
    l.trace('nor this');
    expect(child).not.toHaveBeenCalled();
    expect(lines).toEqual([]);
    expect(l.level).toBe('info');
  });

  it('makes the child once, on the first enabled line, with the request’s bindings', () => {
    const { log, lines, child } = recording('info');
    const l = lazyChildLogger(log, { reqId: 'r2' }, {});
    l.info({ token: 'secret-value' }, 'first');
    l.warn('second');
    expect(child).toHaveBeenCalledTimes(1);
    expect(lines.map((x) => [x['msg'], x['reqId']])).toEqual([
      ['first', 'r2'],
      ['second', 'r2'],
    ]);
    // The parent's redaction holds for the child.
    expect(JSON.stringify(lines)).not.toContain('secret-value');
  });

  it('makes the child at once for a route with its own level, and on a level change', () => {
    const { log, child } = recording('info');
    lazyChildLogger(log, { reqId: 'r3' }, { level: 'debug' });
    expect(child).toHaveBeenCalledTimes(1);
    const l = lazyChildLogger(log, { reqId: 'r4' }, {});
    l.level = 'debug';
    expect(child).toHaveBeenCalledTimes(2);
    expect(l.level).toBe('debug');
  });

  it('serves as fastify’s childLoggerFactory: request lines carry the request id', async () => {
    const { log, lines } = recording('info');
    const app = Fastify({ loggerInstance: log, childLoggerFactory: lazyChildLogger, logController: new LogController({ disableRequestLogging: true }) });
    app.get('/quiet', async () => 'ok');
    app.get('/chatty', async (req) => (req.log.info('handled'), 'ok'));
    await app.inject('/quiet');
    expect(lines).toEqual([]);
    await app.inject('/chatty');
    expect(lines).toEqual([expect.objectContaining({ msg: 'handled', reqId: expect.any(String) })]);
    await app.close();
  });

  it('serves an app made without loggerInstance (requestLoggers): the same request lines, under the given parent', async () => {
    const { log, lines } = recording('info');
    const app = Fastify({ childLoggerFactory: requestLoggers(log), logController: new LogController({ disableRequestLogging: true }) });
    app.log = log;
    app.get('/quiet', async () => 'ok');
    app.get('/chatty', async (req) => (req.log.info({ token: 'secret-value' }, 'handled'), 'ok'));
    await app.inject('/quiet');
    expect(lines).toEqual([]);
    await app.inject('/chatty');
    expect(lines).toEqual([expect.objectContaining({ msg: 'handled', reqId: expect.any(String), token: '[Redacted]' })]);
    app.log.warn('from the app');
    expect(lines[1]).toMatchObject({ msg: 'from the app' });
    await app.close();
  });
});
