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

  it("refuses a tenant's key: a job selects devices across tenants, as POST /v1/jobs does (red team 3)", async () => {
    // A builtin server without `tenants` serves every key: a tenant's key could start a job on other tenants' devices.
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
    const args = { tool: 'self.mark', filter: { ids: ['02:00:00:00:6a:01'] } };
    const refused = await hub.call('mcp__fleet__fleet_start_job', args, { tenant: 'globex', principal: 'p-globex' });
    expect(refused.isError).toBe(true);
    expect(JSON.stringify(refused.content)).toContain('fleet jobs are for operator keys');
    expect(bodies).toEqual([]);
    // An operator key (no tenant) still starts it.
    expect((await hub.call('mcp__fleet__fleet_start_job', args, { principal: 'p-ops' })).isError).toBeFalsy();
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
