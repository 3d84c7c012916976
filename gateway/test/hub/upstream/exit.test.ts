import { readdirSync, readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { deferred } from '../../../../test/support/wait.js';
import { FIXTURE_SERVER, untilHub } from '../../../../test/support/hub.js';
import { buildHub, facadeClient, type BuiltHub } from '../support.js';

const built: BuiltHub[] = [];
const groups: number[] = [];
afterEach(async () => {
  for (const b of built.splice(0)) await b.hub.close();
  // Whatever a failed run left behind.
  for (const g of groups.splice(0))
    try {
      process.kill(-g, 'SIGKILL');
    } catch {
      /* none left */
    }
});

/** Live processes of a process group (Linux /proc). */
function groupMembers(pgid: number): number[] {
  const out: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const rest = readFileSync(`/proc/${e}/stat`, 'utf8').split(') ').at(-1)!.split(' ');
      if (Number(rest[2]) === pgid && rest[0] !== 'Z' && rest[0] !== 'X') out.push(Number(e));
    } catch {
      /* exited meanwhile */
    }
  }
  return out;
}

/**
 * A hosted stdio server's process exits while a helper it started still holds its stdout (a shell wrapper's or npx's
 * helpers do): the connection ends with the process, not when the pipes close. Before, the server stayed "ready" with
 * its tools listed, and a call in flight waited out its whole timeout.
 */
describe('a stdio server whose process exits', { timeout: 30_000 }, () => {
  it('is failed at once with the exit reason, its tools leave tools/list (list_changed sent), and the call in flight fails', async () => {
    const b = buildHub(
      { fix: { command: process.execPath, args: [FIXTURE_SERVER], env: { HOLD_STDOUT: '1' } } },
      // No restart, so the state after the exit stays to be read; a call would otherwise wait 60 s.
      { maxRestarts: 0, callTimeoutMs: 60_000 },
    );
    built.push(b);
    const { hub } = b;
    await hub.start();
    expect(hub.servers({})[0]).toMatchObject({ name: 'fix', state: 'ready' });
    const client = await facadeClient(hub, {});
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('mcp__fix__slow');

    const call = hub.call('mcp__fix__slow', { ms: 60_000 }, {});
    await b.untilLog((l) => typeof l['stderr'] === 'string' && l['stderr'].includes('slow started'));
    const [pid] = hub.childPids();
    groups.push(pid!);
    // What every /mcp session's tools/list_changed is sent from (facade/mcp-endpoint.ts).
    const changed = deferred();
    const off = hub.onToolsChanged(() => changed.resolve());
    // The helper holding the server's pipes is in its process group.
    expect(groupMembers(pid!).length).toBeGreaterThan(1);
    process.kill(pid!, 'SIGKILL');

    const result = await call;
    expect(result.isError).toBe(true);
    const text = (result.content[0] as { text: string }).text;
    expect(text).not.toMatch(/did not answer within/); // failed by the exit, not by the 60 s timeout
    await changed.promise;
    off();
    await untilHub(hub, () => hub.servers({})[0]!.state === 'failed', 'the server to be failed');
    expect(hub.servers({})[0]!.lastError).toMatch(/exit SIGKILL/);
    expect(hub.tools({}).filter((t) => t.name.startsWith('mcp__fix__'))).toEqual([]);
    expect((await client.listTools()).tools.map((t) => t.name)).not.toContain('mcp__fix__slow');
    // What the server left in its process group (the helper holding its pipes) is gone too.
    await untilHub(hub, () => groupMembers(pid!).length === 0, 'the helper to be gone');
    await client.close();
  });
});
