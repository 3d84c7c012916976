import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { isolatedEnv, ROOT, spawnGateway } from '../../../test/support/gateway-process.js';

const run = promisify(execFile);

/** What a runtime install needs: the manifests, the lock file, the start script and every dist/ (built by globalSetup). */
const RUNTIME_FILES = [
  'package.json',
  'package-lock.json',
  'scripts',
  'protocol/package.json',
  'protocol/dist',
  'gateway/package.json',
  'gateway/dist',
  'mcp_servers/weather/package.json',
  'mcp_servers/weather/dist',
  'console/package.json',
  'console/dist',
];
const WORKSPACE_DISTS = ['protocol/dist', 'gateway/dist', 'mcp_servers/weather/dist'];

/** Bare module specifiers of an ES module: static imports, re-exports, side-effect and dynamic imports. */
function bareImports(js: string): string[] {
  // Statements start a line in tsc's output; anchoring there keeps words like "came from'" in strings out.
  const found = js.matchAll(/(?:^(?:import|export)\b[^;'"]*?\bfrom\s*|^import\s*|\bimport\s*\(\s*)['"]([^'"./][^'"]*)['"]/gm);
  return [...found].map((m) => m[1]!);
}

const packageName = (specifier: string) =>
  specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/');

/** Node's lookup: node_modules/<name> in the file's folder or any folder above it, up to `root`. */
function installedFor(file: string, name: string, root: string): boolean {
  for (let d = dirname(file); d.startsWith(root); d = dirname(d)) if (existsSync(join(d, 'node_modules', name, 'package.json'))) return true;
  return false;
}

function jsFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.js'))
    .map((f) => join(dir, f));
}

// A production host installs without dev dependencies (`npm ci --omit=dev`) and runs the build: nothing
// the gateway or the sample server imports may be a dev dependency, and tsx/tsc are never needed.
describe('runtime install without dev dependencies', () => {
  it('npm ci --omit=dev next to the build, then the gateway starts, hosts the compiled weather server and answers /healthz', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-runtime-'));
    try {
      for (const f of RUNTIME_FILES) {
        mkdirSync(dirname(join(dir, f)), { recursive: true });
        cpSync(join(ROOT, f), join(dir, f), { recursive: true });
      }
      // The cache is warm after the development install; the registry is asked only for what it lacks.
      await run('npm', ['ci', '--omit=dev', '--prefer-offline', '--no-audit', '--no-fund'], { cwd: dir });
      for (const dev of ['typescript', 'tsx', 'vitest', 'eslint', 'vite', 'preact', 'playwright-core'])
        expect(existsSync(join(dir, 'node_modules', dev)), `${dev} installed`).toBe(false);

      // Every import in the build, lazy ones included, resolves to a package of this install.
      const missing = new Set<string>();
      for (const file of WORKSPACE_DISTS.flatMap((d) => jsFiles(join(dir, d))))
        for (const spec of bareImports(readFileSync(file, 'utf8')))
          if (!isBuiltin(spec) && !installedFor(file, packageName(spec), dir)) missing.add(`${spec} (${file.slice(dir.length + 1)})`);
      expect([...missing]).toEqual([]);

      writeFileSync(join(dir, 'gateway.config.json'), '{}');
      writeFileSync(join(dir, 'mcp.json'), JSON.stringify({ mcpServers: { weather: { command: 'node', args: ['mcp_servers/weather/dist/main.js'] } } }));
      const env = isolatedEnv(dir, { GATEWAY_API_KEYS: 'runtime-test-key', GATEWAY_MCP_CONFIG: join(dir, 'mcp.json') });
      const gw = spawnGateway('npm', ['start', '--silent'], env, dir);
      try {
        const started = (await gw.logLine('voxgate started')) as { http: string };
        await gw.logLine('upstream MCP server ready');
        expect((await fetch(`http://${started.http}/healthz`)).status).toBe(200);
        // The console is static files built beforehand: served without Vite or Preact installed.
        const page = await fetch(`http://${started.http}/console/`);
        expect([page.status, (await page.text()).includes('<div id="app">')]).toEqual([200, true]);
        const tools = await fetch(`http://${started.http}/v1/tools`, { headers: { authorization: 'Bearer runtime-test-key' } });
        expect(JSON.stringify(await tools.json())).toContain('mcp__weather__');
        gw.child.kill('SIGTERM');
        expect(await gw.exited).toEqual({ code: 0, signal: null });
      } finally {
        gw.child.kill('SIGKILL');
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);
});

describe('package exports', () => {
  it('tests run the TypeScript sources of @voxgate/* (the voxgate-source condition); plain node runs dist/', async () => {
    const viaPackage = await import('@voxgate/protocol');
    const source = await import('../../../protocol/src/index.js');
    expect(viaPackage.normalizeDeviceId).toBe(source.normalizeDeviceId);

    const resolve = async (...conditions: string[]) =>
      (
        await run(process.execPath, [...conditions, '--input-type=module', '-e', "console.log(import.meta.resolve('@voxgate/gateway'))"], { cwd: ROOT })
      ).stdout.trim();
    expect(await resolve()).toBe(`file://${ROOT}gateway/dist/index.js`);
    expect(await resolve('--conditions=voxgate-source')).toBe(`file://${ROOT}gateway/src/index.ts`);
  });
});
