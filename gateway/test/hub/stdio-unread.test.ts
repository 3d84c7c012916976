import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { FIXTURE_SERVER } from '../../../test/support/hub.js';
import { buildHub, type BuiltHub } from './support.js';

const DEAF = fileURLToPath(new URL('./fixtures/deaf-server.mjs', import.meta.url));

/**
 * A hosted stdio server that stops reading its stdin while it keeps sending requests (red team 10): every answer the
 * gateway wrote it (each echoing an id up to the message bound long) waited in the gateway's memory, ~860 MB from one
 * child in seconds, and each write past the pipe's buffer added a 'drain' listener.
 */
describe('a stdio server that reads nothing of what it is sent', { timeout: 60_000 }, () => {
  let b: BuiltHub | undefined;
  afterEach(async () => {
    await b?.hub.close();
    b = undefined;
  });

  it('has what waits for it bounded: writes past the bound are refused, its calls fail clearly, counted, logged once; others are served', async () => {
    b = buildHub({ deaf: { command: process.execPath, args: [DEAF] }, fix: { command: process.execPath, args: [FIXTURE_SERVER] } }, { callTimeoutMs: 60_000 });
    const { hub } = b;
    await hub.start();
    expect(hub.servers({}).map((s) => s.state)).toEqual(['ready', 'ready']);
    // The bound is reached well before its 40 requests of ~1 MB are answered.
    await b.untilLog((l) => l['msg'] === 'MCP server is not reading its stdin: messages to it refused (its calls fail) until it reads');
    expect((await b.metrics.hubUnread.get()).values.find((v) => v.labels['transport'] === 'stdio')?.value).toBeGreaterThan(0);

    // Before: the call was queued behind everything else and waited out its whole timeout.
    const r = await hub.call('mcp__deaf__echo', {}, {});
    expect(r.isError).toBe(true);
    expect(JSON.stringify(r.content)).toContain('is not reading its input');
    // Not killed (it may be busy, not hostile): it stays, and the other server serves as before.
    expect(hub.servers({}).find((s) => s.name === 'deaf')?.state).toBe('ready');
    expect((await hub.call('mcp__fix__echo', { text: 'hi' }, {})).isError).toBeFalsy();
    await b.untilLog((l) => l['stderr'] === 'deaf: all sent');
    expect(b.logs.filter((l) => typeof l['msg'] === 'string' && l['msg'].startsWith('MCP server is not reading its stdin'))).toHaveLength(1);
  });
});

/**
 * Many peers that read nothing (red team 10's open item): each was bounded on its own (~8 MiB), but together they held
 * as many times that as there were of them, 256 tool processes 2 GiB. Here three stdio servers that read nothing each
 * want ~6 MB held for them, against a budget of 8 MiB for the gateway; a fourth server reads what it is sent.
 */
describe('stdio servers that read nothing, together', { timeout: 120_000 }, () => {
  let b: BuiltHub | undefined;
  afterEach(async () => {
    await b?.hub.close();
    b = undefined;
  });

  it('hold no more than mcp.unreadBudgetBytes between them; a server that reads is served all the while', async () => {
    const budget = 8 * 1024 * 1024;
    const deaf = { command: process.execPath, args: [DEAF], env: { PINGS: '6' } };
    b = buildHub(
      { deaf0: deaf, deaf1: deaf, deaf2: deaf, fix: { command: process.execPath, args: [FIXTURE_SERVER] } },
      { callTimeoutMs: 60_000 },
      { unreadBudgetBytes: budget },
    );
    const { hub, metrics } = b;
    await hub.start();
    // Before: nothing bounded them together (and no such line, no such metric): 3 × 6 MB waited in the gateway.
    await b.untilLog((l) => typeof l['msg'] === 'string' && l['msg'].startsWith('MCP unread budget full'));
    const full = (await metrics.hubUnreadFull.get()).values.reduce((n, v) => n + v.value, 0);
    expect(full).toBeGreaterThan(0);

    // The server that reads is answered while they flood (its few bytes fit, or the largest holder makes room).
    for (let i = 0; i < 5; i++) expect((await hub.call('mcp__fix__echo', { text: `hi ${i}` }, {})).isError).toBeFalsy();

    // Never more than the budget at once, and it was reached (each answer to a deaf server is ~1 MB).
    const peak = (await metrics.hubUnreadPeak.get()).values[0]!.value;
    expect(peak).toBeLessThanOrEqual(budget);
    expect(peak).toBeGreaterThan(budget - 1_100_000);
    expect((await metrics.hubUnreadBytes.get()).values[0]!.value).toBeLessThanOrEqual(budget);
  });

  it("make room for another server's message: the one holding the most is cut, as if it crashed, and restarted", async () => {
    const budget = 4 * 1024 * 1024;
    const deaf = { command: process.execPath, args: [DEAF], env: { PINGS: '6' } };
    // Results up to 4 MiB, so that fix may echo 1.5 MB (more than the budget has left once deaf fills it).
    b = buildHub(
      { deaf, fix: { command: process.execPath, args: [FIXTURE_SERVER] } },
      { callTimeoutMs: 60_000, maxResultBytes: 4 * 1024 * 1024 },
      { unreadBudgetBytes: budget },
    );
    const { hub, metrics } = b;
    await hub.start();
    await b.untilLog((l) => String(l['msg']).startsWith('MCP unread budget full') && l['server'] === 'deaf');

    const text = 'z'.repeat(1_500_000);
    const r = await hub.call('mcp__fix__echo', { text }, {});
    expect(r.isError).toBeFalsy();
    expect((r.content as Array<{ text: string }>)[0]!.text).toHaveLength(text.length);
    const cut = (await metrics.hubUnreadFull.get()).values.find((v) => v.labels['outcome'] === 'cut')?.value;
    expect(cut).toBeGreaterThanOrEqual(1);
    expect(b.logs.find((l) => String(l['msg']).includes('holding the most cut'))).toMatchObject({ cut: { server: 'deaf' }, for: { server: 'fix' } });
    // Its process group killed, it is restarted with the backoff, as after a crash.
    await b.untilLog((l) => String(l['msg']).startsWith('upstream MCP server connection lost') && l['server'] === 'deaf');
    expect((await metrics.hubUnreadPeak.get()).values[0]!.value).toBeLessThanOrEqual(budget);
  });
});
