import { afterEach, describe, expect, it } from 'vitest';
import { needsConfirmation } from '../../src/assistant/toolset.js';
import { GatewayError } from '../../src/errors.js';
import type { McpHub } from '../../src/hub/hub.js';
import { buildHub } from './support.js';

let hubs: McpHub[] = [];
afterEach(async () => {
  await Promise.all(hubs.map((h) => h.close()));
  hubs = [];
});

describe('the fleet_start_job builtin', () => {
  it('is destructive, so the assistant asks a person before it runs', async () => {
    const { hub } = buildHub({ fleet: { type: 'builtin', tools: ['fleet_start_job'] } });
    hubs.push(hub);
    await hub.start();
    const tool = hub.tools({}).find((t) => t.name === 'mcp__fleet__fleet_start_job')!;
    expect(tool.annotations).toMatchObject({ destructiveHint: true });
    expect(needsConfirmation(tool.name, tool, [])).toBe(true);
    // The hub's own view of the target (what a turn checks before running a call) says the same.
    expect(hub.callTarget(tool.name, {}, {})?.annotations).toMatchObject({ destructiveHint: true });
  });

  it('starts a job through the fleet port, and answers a refusal as a tool error', async () => {
    const { hub } = buildHub({ fleet: { type: 'builtin', tools: ['fleet_start_job'] } });
    hubs.push(hub);
    await hub.start();
    const bodies: Array<Record<string, unknown>> = [];
    hub.useFleetJobs({
      start: async (body) => {
        bodies.push(body);
        if ((body['filter'] as Record<string, unknown>)['board'] === 'none') throw new GatewayError('INVALID_REQUEST', 'filter selects nothing you may reach');
        return { id: 'job_1', state: 'running', total: 3 };
      },
    });
    const args = { tool: 'self.audio_speaker.set_volume', arguments: { volume: 10 }, filter: { board: 'esp32-s3-box' }, concurrency: 2 };
    const ok = await hub.call('mcp__fleet__fleet_start_job', args, {});
    expect(ok.isError).toBeFalsy();
    expect(ok.structuredContent).toEqual({ jobId: 'job_1', state: 'running', devices: 3 });
    expect(bodies[0]).toEqual(args);
    const refused = await hub.call('mcp__fleet__fleet_start_job', { tool: 't', filter: { board: 'none' } }, {});
    expect(refused.isError).toBe(true);
    expect(JSON.stringify(refused.content)).toContain('filter selects nothing');
    // Arguments outside the schema never reach the fleet.
    await expect(hub.call('mcp__fleet__fleet_start_job', { tool: 't', filter: {}, extra: 1 }, {})).rejects.toMatchObject({ code: 'INVALID_ARGUMENTS' });
    expect(bodies).toHaveLength(2);
  });

  it("starts the job as the caller's key (its principal), so the job stops when that key is removed (fleet/key-grants.ts)", async () => {
    const { hub } = buildHub({ fleet: { type: 'builtin', tools: ['fleet_start_job'] } });
    hubs.push(hub);
    await hub.start();
    const principals: Array<string | undefined> = [];
    hub.useFleetJobs({
      start: async (_body, principal) => {
        principals.push(principal);
        return { id: 'job_1', state: 'running', total: 1 };
      },
    });
    const ok = await hub.call('mcp__fleet__fleet_start_job', { tool: 't', filter: { board: 'b' } }, { principal: 'key:abc' });
    expect(ok.isError).toBeFalsy();
    expect(principals).toEqual(['key:abc']);
  });

  it("refuses a tenant's caller: a job's filter selects devices across tenants (POST /v1/jobs is for operator keys)", async () => {
    const { hub } = buildHub({ fleet: { type: 'builtin', tools: ['fleet_start_job'] } });
    hubs.push(hub);
    await hub.start();
    const bodies: Array<Record<string, unknown>> = [];
    hub.useFleetJobs({
      start: async (body) => {
        bodies.push(body);
        return { id: 'job_1', state: 'running', total: 1 };
      },
    });
    // The server has no `tenants`, so every caller sees the tool; only an operator may start a job with it.
    expect(hub.tools({ tenant: 'acme' }).some((t) => t.name === 'mcp__fleet__fleet_start_job')).toBe(true);
    const args = { tool: 'self.reboot', filter: { ids: ['02:00:00:00:6b:01'] } };
    const refused = await hub.call('mcp__fleet__fleet_start_job', args, { tenant: 'acme' });
    expect(refused.isError).toBe(true);
    expect(JSON.stringify(refused.content)).toContain('for operators');
    expect(bodies).toEqual([]);
    expect((await hub.call('mcp__fleet__fleet_start_job', args, {})).isError).toBeFalsy();
    expect(bodies).toEqual([args]);
  });

  it('without a fleet plugged in, says so', async () => {
    const { hub } = buildHub({ fleet: { type: 'builtin', tools: ['fleet_start_job'] } });
    hubs.push(hub);
    await hub.start();
    const r = await hub.call('mcp__fleet__fleet_start_job', { tool: 't', filter: { board: 'x' } }, {});
    expect(r.isError).toBe(true);
  });
});
