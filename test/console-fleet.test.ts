import { describe, expect, it } from 'vitest';
import { conversationOf, timingsText } from '../console/src/lib/conversation.js';
import { mergeEvents, parseEvent } from '../console/src/lib/event-list.js';
import { EMPTY_JOB_FORM, jobBody, jobProgress, metaPatch, parseArgs, parseTags, scheduleBody, type ScheduleForm } from '../console/src/lib/fleet.js';
import { prettyJson } from '../console/src/lib/json-text.js';
import { isLoopback, loopbackHint } from '../console/src/lib/lan-hint.js';
import { capabilitiesOf } from '../console/src/lib/routes-of.js';
import type { GatewayEvent } from '../console/src/lib/types.js';

/** The console's logic that needs no browser: fleet forms to request bodies (FLEET-API.md), conversations, history merging, hints. */

const ev = (id: string, type: GatewayEvent['type'], at: string, data: Record<string, unknown> = {}, deviceId = 'aa:bb:cc:dd:ee:ff'): GatewayEvent => ({
  id,
  type,
  deviceId,
  at,
  data,
});

describe('fleet forms', () => {
  it('tags: comma or space separated, each once, in the contract alphabet', () => {
    expect(parseTags(' kitchen, speaker  floor-1,kitchen ')).toEqual({ ok: true, value: ['kitchen', 'speaker', 'floor-1'] });
    expect(parseTags('')).toEqual({ ok: true, value: [] });
    expect(parseTags('ok, bad/tag')).toMatchObject({ ok: false, message: expect.stringContaining('bad/tag') });
    expect(parseTags('x'.repeat(33))).toMatchObject({ ok: false });
    expect(parseTags(Array.from({ length: 33 }, (_, i) => `t${i}`).join(','))).toEqual({ ok: false, message: 'at most 32 tags' });
  });

  it('name/room/tags: empty clears (null), limits checked', () => {
    expect(metaPatch({ name: ' Living-room speaker ', room: '', tags: 'speaker' })).toEqual({
      ok: true,
      value: { name: 'Living-room speaker', room: null, tags: ['speaker'] },
    });
    expect(metaPatch({ name: 'n'.repeat(65), room: '', tags: '' })).toMatchObject({ ok: false, message: 'name: at most 64 characters' });
  });

  it('arguments: a JSON object or nothing', () => {
    expect(parseArgs('')).toEqual({ ok: true, value: {} });
    expect(parseArgs('{"volume": 40}')).toEqual({ ok: true, value: { volume: 40 } });
    expect(parseArgs('[1]')).toMatchObject({ ok: false });
    expect(parseArgs('{')).toMatchObject({ ok: false, message: 'arguments: not valid JSON' });
  });

  it('a job: tool, filter (never empty: that would be every device), rollout numbers, ttl in ms', () => {
    expect(jobBody({ ...EMPTY_JOB_FORM, tool: 'self.x' })).toMatchObject({ ok: false, message: expect.stringContaining('filter') });
    expect(jobBody({ ...EMPTY_JOB_FORM, tags: 'kitchen' })).toMatchObject({ ok: false, message: expect.stringContaining('tool') });
    const ok = jobBody({
      ...EMPTY_JOB_FORM,
      tool: ' self.audio_speaker.set_volume ',
      arguments: '{"volume": 40}',
      tags: 'kitchen speaker',
      firmware: '1.2.0',
      ids: 'aa:bb:cc:dd:ee:01, aa:bb:cc:dd:ee:01 aa:bb:cc:dd:ee:02',
      concurrency: '5',
      ratePerSecond: '2.5',
      abortOverPercent: '20',
      ttlSeconds: '3600',
    });
    expect(ok).toEqual({
      ok: true,
      value: {
        tool: 'self.audio_speaker.set_volume',
        arguments: { volume: 40 },
        filter: { tags: ['kitchen', 'speaker'], firmware: '1.2.0', ids: ['aa:bb:cc:dd:ee:01', 'aa:bb:cc:dd:ee:02'] },
        concurrency: 5,
        ratePerSecond: 2.5,
        abortOverPercent: 20,
        ttlMs: 3_600_000,
      },
    });
    expect(jobBody({ ...EMPTY_JOB_FORM, tool: 't', room: 'kitchen', concurrency: '1.5' })).toMatchObject({
      ok: false,
      message: expect.stringContaining('concurrency'),
    });
    expect(jobBody({ ...EMPTY_JOB_FORM, tool: 't', room: 'kitchen', abortOverPercent: '150' })).toMatchObject({
      ok: false,
      message: expect.stringContaining('abort'),
    });
    // 0 % is a rule too: abort at the first failure.
    expect(jobBody({ ...EMPTY_JOB_FORM, tool: 't', room: 'kitchen', abortOverPercent: '0' })).toMatchObject({
      ok: true,
      value: { abortOverPercent: 0 },
    });
    // Empty optional numbers are left out: the gateway's defaults apply.
    expect(jobBody({ ...EMPTY_JOB_FORM, tool: 't', room: 'kitchen', concurrency: '' })).toEqual({
      ok: true,
      value: { tool: 't', filter: { room: 'kitchen' } },
    });
  });

  const schedule: ScheduleForm = {
    when: 'cron',
    cron: '',
    timeZone: 'Europe/Berlin',
    at: '',
    target: 'call',
    device: 'aa:bb:cc:dd:ee:ff',
    tool: 'self.light.set',
    arguments: '{"on": true}',
    job: EMPTY_JOB_FORM,
  };
  it('a schedule: exactly one of cron/at and of call/job', () => {
    expect(scheduleBody({ ...schedule, cron: ' 0  7 * * 1-5 ' })).toEqual({
      ok: true,
      value: {
        cron: '0 7 * * 1-5',
        timeZone: 'Europe/Berlin',
        call: { device: 'aa:bb:cc:dd:ee:ff', tool: 'self.light.set', arguments: { on: true } },
      },
    });
    expect(scheduleBody({ ...schedule, cron: '0 7 *' })).toMatchObject({ ok: false, message: expect.stringContaining('five fields') });
    expect(scheduleBody({ ...schedule, cron: '' })).toMatchObject({ ok: false });
    const at = scheduleBody({
      ...schedule,
      when: 'at',
      at: '2030-01-02T03:04:05Z',
      target: 'job',
      job: { ...EMPTY_JOB_FORM, tool: 'self.reboot', room: 'lab' },
    });
    expect(at).toEqual({
      ok: true,
      value: { at: '2030-01-02T03:04:05.000Z', job: { tool: 'self.reboot', filter: { room: 'lab' }, concurrency: 10 } },
    });
    expect(scheduleBody({ ...schedule, when: 'at', at: 'soon' })).toMatchObject({ ok: false, message: 'at: a date and time' });
    expect(scheduleBody({ ...schedule, cron: '* * * * *', device: '' })).toMatchObject({
      ok: false,
      message: expect.stringContaining('device'),
    });
  });

  it('job progress: finished of total', () => {
    expect(jobProgress({ queued: 1, sent: 1, succeeded: 5, failed: 2, expired: 1, cancelled: 0 }, 10)).toEqual({ done: 8, percent: 80 });
    expect(jobProgress({ queued: 0, sent: 0, succeeded: 0, failed: 0, expired: 0, cancelled: 0 }, 0)).toEqual({ done: 0, percent: 0 });
  });
});

describe('conversation from voice.* events', () => {
  it('heard, tool call and result on one line, reply with timings, oldest first; malformed data skipped', () => {
    const lines = conversationOf([
      ev('5', 'voice.reply', '2026-11-26T10:00:03.000Z', {
        session: 's1',
        text: 'Volume is 40.',
        outcome: 'answered',
        timings: { asrMs: 120.4, totalMs: 900, bogus: 1 },
      }),
      ev('1', 'voice.transcript', '2026-11-26T10:00:00.000Z', { session: 's1', text: 'set the volume to forty' }),
      ev('2', 'voice.tool', '2026-11-26T10:00:01.000Z', { session: 's1', phase: 'call', name: 'self.audio_speaker.set_volume' }),
      ev('3', 'voice.tool', '2026-11-26T10:00:02.000Z', {
        session: 's1',
        phase: 'result',
        name: 'self.audio_speaker.set_volume',
        isError: false,
        durationMs: 42,
      }),
      ev('4', 'voice.tool', '2026-11-26T10:00:02.500Z', { session: 's1', phase: 'call' }),
      ev('6', 'device.online', '2026-11-26T10:00:04.000Z'),
    ]);
    expect(lines).toEqual([
      {
        kind: 'heard',
        id: '1',
        at: '2026-11-26T10:00:00.000Z',
        deviceId: 'aa:bb:cc:dd:ee:ff',
        session: 's1',
        text: 'set the volume to forty',
      },
      {
        kind: 'tool',
        id: '2',
        at: '2026-11-26T10:00:01.000Z',
        deviceId: 'aa:bb:cc:dd:ee:ff',
        session: 's1',
        name: 'self.audio_speaker.set_volume',
        state: 'ok',
        durationMs: 42,
      },
      {
        kind: 'reply',
        id: '5',
        at: '2026-11-26T10:00:03.000Z',
        deviceId: 'aa:bb:cc:dd:ee:ff',
        session: 's1',
        text: 'Volume is 40.',
        outcome: 'answered',
        timings: { asrMs: 120.4, totalMs: 900 },
      },
    ]);
    expect(timingsText({ asrMs: 120.4, totalMs: 900 })).toBe('speech recognised 120 ms · total 900 ms');
  });

  it('a call with no result yet is running', () => {
    const [line] = conversationOf([ev('1', 'voice.tool', '2026-11-26T10:00:01.000Z', { session: 's', phase: 'call', name: 'x' })]);
    expect(line).toMatchObject({ kind: 'tool', state: 'running' });
  });
});

describe('events from history and the stream', () => {
  it('merges by id, newest first, bounded; the same array when nothing is new', () => {
    const live = [ev('b-2', 'device.ready', '2026-11-26T10:00:02.000Z'), ev('b-1', 'device.online', '2026-11-26T10:00:01.000Z')];
    const history = [ev('a-9', 'device.offline', '2026-11-26T09:00:00.000Z'), ev('b-1', 'device.online', '2026-11-26T10:00:01.000Z')];
    expect(mergeEvents(live, history, 10).map((e) => e.id)).toEqual(['b-2', 'b-1', 'a-9']);
    expect(mergeEvents(live, history, 2).map((e) => e.id)).toEqual(['b-2', 'b-1']);
    expect(mergeEvents(live, [live[0]!], 10)).toBe(live);
  });

  it('checks each event', () => {
    expect(parseEvent('{"id":"1","type":"call.state","deviceId":"d","at":"2026-11-26T10:00:00Z","data":{"state":"sent"}}')).toMatchObject({
      type: 'call.state',
      data: { state: 'sent' },
    });
    expect(parseEvent('{"id":1,"type":"x","deviceId":"d","at":"t"}')).toBeUndefined();
    expect(parseEvent('{"id":"1","type":"x","deviceId":"d","at":"t","data":[1]}')).toMatchObject({ data: {} });
    expect(parseEvent('not json')).toBeUndefined();
  });
});

describe('what the gateway offers', () => {
  const caps = capabilitiesOf({
    paths: {
      '/v1/devices': {
        get: {
          parameters: [
            { name: 'tag', in: 'query' },
            { name: 'limit', in: 'query' },
            { name: 'x', in: 'header' },
          ],
        },
      },
      '/v1/calls/{callId}': { delete: {} },
    },
  });
  it('routes by shape (parameter names do not matter), query parameters by name', () => {
    expect(caps.has('DELETE', '/v1/calls/{id}')).toBe(true);
    expect(caps.has('get', '/v1/calls/{id}')).toBe(false);
    expect(caps.has('get', '/v1/jobs')).toBe(false);
    expect([...caps.query('get', '/v1/devices')]).toEqual(['tag', 'limit']);
  });
  it('without a document, every route is taken as present (a 404 then says otherwise)', () => {
    expect(capabilitiesOf(undefined).has('get', '/v1/jobs')).toBe(true);
  });
});

describe('text and hints', () => {
  it('JSON text is indented; anything else stays as it came', () => {
    expect(prettyJson('{"a":1,"b":[true]}')).toBe('{\n  "a": 1,\n  "b": [\n    true\n  ]\n}');
    expect(prettyJson('  [1]  ')).toBe('[\n  1\n]');
    expect(prettyJson('{not json}')).toBeUndefined();
    expect(prettyJson('42')).toBeUndefined();
    expect(prettyJson('hello')).toBeUndefined();
  });

  it('a loopback page address is named, with a LAN-style example of the OTA URL', () => {
    expect(loopbackHint('http://localhost:8000/console/#/devices')).toEqual({
      host: 'localhost',
      example: 'http://192.168.1.20:8000/xiaozhi/ota/',
    });
    expect(loopbackHint('http://127.0.0.1:8000/console/')?.host).toBe('127.0.0.1');
    expect(loopbackHint('http://[::1]:8000/console/')?.host).toBe('[::1]');
    expect(loopbackHint('http://192.168.1.5:8000/console/')).toBeUndefined();
    expect(loopbackHint('https://voxgate.example.com/console/')).toBeUndefined();
    expect(isLoopback('127.1.2.3')).toBe(true);
    expect(isLoopback('10.0.0.1')).toBe(false);
  });
});
