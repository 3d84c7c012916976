import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { FleetPublisher, PUBLISH_BACKOFF } from '../../src/facade/publish.js';
import { buildHub } from '../hub/support.js';

describe('FleetPublisher backoff', () => {
  it('waits as mcp_pipe.py does: doubling from the first delay up to the cap (1 s to 10 min by default)', async () => {
    expect(PUBLISH_BACKOFF).toEqual({ firstMs: 1000, maxMs: 600_000 });
    // A port that accepts TCP and closes at once: every dial fails.
    const srv = createServer((s) => s.destroy());
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
    const { hub, logs, untilLog } = buildHub({});
    const p = new FleetPublisher(
      hub,
      { url: `ws://127.0.0.1:${(srv.address() as AddressInfo).port}/mcp/` },
      { log: hub['d'].log, version: '0', backoff: { firstMs: 5, maxMs: 40 } },
    );
    p.start();
    await untilLog(() => logs.filter((l) => l['msg'] === 'publishing to the MCP endpoint: cannot connect').length >= 6);
    p.close();
    srv.close();
    await hub.close();
    const waits = logs.filter((l) => l['msg'] === 'publishing to the MCP endpoint: cannot connect').map((l) => l['retryInMs']);
    expect(waits.slice(0, 6)).toEqual([5, 10, 20, 40, 40, 40]);
  });
});
