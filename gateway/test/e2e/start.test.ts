import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  commandLine,
  descendants,
  isolatedEnv,
  portIsFree,
  procStat,
  ROOT,
  spawnGateway,
  startCompiledGateway,
  WEATHER_MAIN,
} from '../../../test/support/gateway-process.js';
import { isAlive } from '../../../test/support/hub.js';

// `npm start` is what the README tells people to run: the signal an operator (or a container runtime)
// sends to npm's own PID must stop the gateway and every hub child, and free the ports.
describe('npm start, and what the started gateway prints', () => {
  it("runs the compiled gateway as npm's direct child, and SIGTERM to npm stops it and its hub children", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-start-'));
    writeFileSync(join(dataDir, 'gateway.config.json'), '{}');
    // A stdio MCP server (the compiled sample): a grandchild that must not outlive the gateway.
    writeFileSync(join(dataDir, 'mcp.json'), JSON.stringify({ mcpServers: { weather: { command: process.execPath, args: [WEATHER_MAIN] } } }));
    const npm = spawnGateway(
      'npm',
      ['start', '--silent'],
      isolatedEnv(dataDir, { GATEWAY_API_KEYS: 'start-test-key', GATEWAY_MCP_CONFIG: join(dataDir, 'mcp.json') }),
    );
    let tree: number[] = [];
    try {
      const started = (await npm.logLine('voxgate started')) as { http: string; mqtt: string; [k: string]: unknown };
      // The startup summary, as fields of the same line (JSON logs).
      expect(started).toMatchObject({
        ota: [`http://${started.http}/xiaozhi/ota/`],
        console: [`http://${started.http}/console/`],
        configFile: join(dataDir, 'gateway.config.json'),
        mcpServersFile: join(dataDir, 'mcp.json'),
        apiKeys: 'GATEWAY_API_KEYS',
        models: [],
      });
      await npm.logLine('upstream MCP server ready');
      tree = descendants(npm.pid);
      // `exec` in the start script: npm's child is node running the compiled entry, with no shell between.
      const gateway = tree.find((pid) => procStat(pid)?.ppid === npm.pid);
      expect(commandLine(gateway!)).toEqual([
        'node',
        '--no-allocation-site-pretenuring',
        '--no-wasm-dynamic-tiering',
        '--no-wasm-tier-up',
        'gateway/dist/main.js',
      ]);
      // The start script's environment reaches node (malloc's trim threshold, docs/performance.md "mcprss"), not the
      // hosted server (a child gets only the inherited allowlist and its own env).
      const environ = (pid: number) => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      expect(environ(gateway!)).toContain('MALLOC_TRIM_THRESHOLD_=131072');
      const weather = tree.find((pid) => commandLine(pid).includes(WEATHER_MAIN));
      expect(weather && procStat(weather)?.ppid).toBe(gateway);
      expect(environ(weather!).filter((kv) => kv.startsWith('MALLOC_'))).toEqual([]);
      const health = await fetch(`http://${started.http}/healthz`);
      expect(health.status).toBe(200);

      process.kill(npm.pid, 'SIGTERM');
      expect(await npm.exited).toEqual({ code: 0, signal: null });
      expect(npm.logs.map((l) => l.msg)).toContain('stopped');
      expect(tree.filter(isAlive)).toEqual([]);
      const port = (hostPort: string) => Number(hostPort.slice(hostPort.lastIndexOf(':') + 1));
      expect(await portIsFree(port(started.http))).toBe(true);
      expect(await portIsFree(port(started.mqtt))).toBe(true);
    } finally {
      for (const pid of [npm.pid, ...tree]) if (isAlive(pid)) process.kill(pid, 'SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 120_000);

  // The node options the gateway runs with are set once, in package.json's start (docs/performance.md, "gcset"); the
  // Dockerfile's CMD is checked against it in containers.test.ts, the systemd example here.
  it("the systemd example starts node as package.json's start does, options and environment included", () => {
    const start = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts['start']!;
    // `[NAME=value ...] exec node [options] gateway/dist/main.js`
    const [, assignments, command] = /^((?:[A-Z_][A-Z0-9_]*=\S*\s+)*)exec\s+(.*)$/.exec(start.trim())!;
    const unit = readFileSync(join(ROOT, 'examples/systemd/voxgate.service'), 'utf8');
    const execStart = /^ExecStart=(.*)$/m.exec(unit)![1]!.trim().split(/\s+/);
    expect(execStart[0]).toBe('/usr/bin/node');
    expect(['node', ...execStart.slice(1)]).toEqual(command!.split(/\s+/));
    const environment = [...unit.matchAll(/^Environment=(\S+)$/gm)].map((m) => m[1]!);
    expect(environment).toEqual(expect.arrayContaining(assignments!.split(/\s+/).filter(Boolean)));
    expect(assignments).toContain('MALLOC_TRIM_THRESHOLD_=');
  });

  // What pretty lines look like is the logger's own (test/log.test.ts); here, that the variable reaches it.
  it('prints readable lines with GATEWAY_LOG_FORMAT=pretty (issue 9 item 20)', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-logs-'));
    writeFileSync(join(dataDir, 'gateway.config.json'), '{}');
    const run = startCompiledGateway(isolatedEnv(dataDir, { GATEWAY_API_KEYS: 'log-format-test-key', GATEWAY_LOG_FORMAT: 'pretty' }));
    try {
      let out = '';
      await new Promise<void>((resolve, reject) => {
        run.child.stdout!.on('data', (b: Buffer) => {
          out += b.toString();
          if (out.includes('voxgate started')) resolve();
        });
        void run.exited.then(() => reject(new Error(`exited before starting; stderr: ${run.stderr()}`)));
      });
      run.child.kill('SIGTERM');
      expect((await run.exited).code).toBe(0);
      expect(out).toMatch(/INFO.*voxgate started/);
      // The startup summary, as lines for a person: where to go and what was read.
      expect(out).toMatch(/OTA URL {6}http:\/\/127\.0\.0\.1:\d+\/xiaozhi\/ota\//);
      expect(out).toContain(`Config file  ${join(dataDir, 'gateway.config.json')}`);
      expect(out).toContain('API key      from GATEWAY_API_KEYS');
      expect(out).toContain('! listening on 127.0.0.1 only');
      expect(out).not.toContain('log-format-test-key');
      expect(out).toContain('stopped');
      expect(run.logs).toEqual([]); // no JSON line at all
    } finally {
      run.child.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});
