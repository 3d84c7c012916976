import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { installSafetyNet, type UnhandledKind } from '../src/safety-net.js';

type Listener = (...args: unknown[]) => void;
const EVENTS = ['unhandledRejection', 'uncaughtException'] as const;
/** `process` as a plain emitter: these events are emitted by hand here. */
const proc = process as unknown as NodeJS.EventEmitter;

/**
 * The net is installed on the real `process`; the test runner's own handlers are set aside meanwhile, so
 * an event emitted here reaches the net only (no error really goes unhandled).
 */
const restore: Array<() => void> = [];
function isolateProcessHandlers(): void {
  for (const event of EVENTS) {
    const saved = proc.listeners(event) as Listener[];
    proc.removeAllListeners(event);
    restore.push(() => {
      proc.removeAllListeners(event);
      for (const l of saved) proc.on(event, l);
    });
  }
}
afterEach(() => {
  for (const r of restore.splice(0)) r();
});

function net(maxLogsPerMinute?: number) {
  isolateProcessHandlers();
  const lines: Array<Record<string, unknown>> = [];
  const counted: UnhandledKind[] = [];
  const stopped: unknown[] = [];
  const log = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) });
  const uninstall = installSafetyNet({
    log,
    count: (k) => counted.push(k),
    onException: (e) => stopped.push(e),
    ...(maxLogsPerMinute !== undefined ? { maxLogsPerMinute } : {}),
  });
  return { lines, counted, stopped, uninstall };
}

describe('installSafetyNet', () => {
  it('logs and counts an unhandled rejection, and goes on (no stop)', () => {
    const n = net();
    proc.emit('unhandledRejection', new Error('injected unhandled rejection'), Promise.resolve());
    expect(n.counted).toEqual(['rejection']);
    expect(n.stopped).toEqual([]);
    expect(n.lines).toHaveLength(1);
    expect(n.lines[0]).toMatchObject({ level: 50, msg: 'unhandled promise rejection; the gateway goes on', err: { message: 'injected unhandled rejection' } });
  });

  it('counts every rejection but logs only up to the cap per minute', () => {
    const n = net(2);
    for (let i = 0; i < 5; i++) proc.emit('unhandledRejection', new Error(`r${i}`), Promise.resolve());
    expect(n.counted).toHaveLength(5);
    expect(n.lines).toHaveLength(2);
  });

  it('logs an uncaught exception as fatal with its origin, counts it, and asks to stop', () => {
    const n = net();
    const err = new Error('injected uncaught exception');
    proc.emit('uncaughtException', err, 'uncaughtException');
    expect(n.counted).toEqual(['exception']);
    expect(n.stopped).toEqual([err]);
    expect(n.lines[0]).toMatchObject({
      level: 60,
      msg: 'uncaught exception; stopping the gateway (state may be inconsistent)',
      origin: 'uncaughtException',
      err: { message: 'injected uncaught exception' },
    });
  });

  it('takes its handlers off the process when uninstalled', () => {
    const n = net();
    expect(EVENTS.map((e) => process.listenerCount(e))).toEqual([1, 1]);
    n.uninstall();
    expect(EVENTS.map((e) => process.listenerCount(e))).toEqual([0, 0]);
  });
});
