/**
 * `npm run conformance`: the official MCP conformance suite's server scenarios against a started gateway.
 *
 * The suite needs Node >= 22 and has no option for a header, so: a gateway (hosting the features fixture)
 * on 127.0.0.1:0, a pass-through that adds the API key (and keeps the caller's Host, so the DNS-rebinding
 * scenario reaches the gateway's own check), and the suite run by Node 22 from the npm `node` package.
 * Both are npm packages fetched by npx into its cache (CONFORMANCE_VERSION, CONFORMANCE_NODE to change).
 * Prints one line per scenario (pass, FAIL, or n/a for a scenario that calls the suite's fixture tools by
 * their bare names); exits non-zero when an applicable scenario fails.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createLogger } from '../../src/log.js';
import { loadConfig, startGateway } from '../../src/index.js';

const VERSION = process.env['CONFORMANCE_VERSION'] ?? '0.1.16';
const NODE = process.env['CONFORMANCE_NODE'] ?? '22';
const KEY = 'conformance-api-key-0123456789';
const FEATURES = fileURLToPath(new URL('../fixtures/mcp-features-server.mjs', import.meta.url));
const RESOURCES = fileURLToPath(new URL('./resources-server.mjs', import.meta.url));

const dir = mkdtempSync(join(tmpdir(), 'voxgate-conformance-'));
writeFileSync(join(dir, 'gateway.config.json'), '{}');
const config = loadConfig(
  { GATEWAY_CONFIG: join(dir, 'gateway.config.json') },
  {
    dataDir: dir,
    apiKeys: [KEY],
    http: { host: '127.0.0.1', port: 0 },
    mqtt: { enabled: false },
    mcp: { servers: { features: { command: process.execPath, args: [FEATURES] }, resources: { command: process.execPath, args: [RESOURCES] } } },
  },
);
const gw = await startGateway(config, { log: createLogger('warn') });
await gw.hubStarted;

// The pass-through: every request gets the API key; everything else, Host included, is passed as sent.
const proxy = createServer((req, res) => {
  const up = request({ host: '127.0.0.1', port: gw.httpPort, method: req.method, path: req.url, headers: { ...req.headers, authorization: `Bearer ${KEY}` } }, (r) => {
    res.writeHead(r.statusCode ?? 502, r.headers);
    r.pipe(res);
  });
  up.on('error', () => res.destroy());
  req.pipe(up);
});
await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
const port = (proxy.address() as { port: number }).port;

const out = join(dir, 'results');
// npx puts both packages' bins on PATH: `node` is Node 22, `conformance` the suite.
const suite = `node "$(command -v conformance)" server --url http://localhost:${port}/mcp -o ${out}`;
const code = await new Promise<number>((resolve) => {
  const sh = spawn('npx', ['-y', '-p', `node@${NODE}`, '-p', `@modelcontextprotocol/conformance@${VERSION}`, '-c', suite], { stdio: 'inherit' });
  sh.on('exit', (c) => resolve(c ?? 1));
});

// A scenario that calls one of the suite's fixture tools or prompts by its bare name can't apply to a gateway,
// which namespaces every tool and prompt (`mcp__{server}__{name}`); every other scenario must pass.
const NOT_APPLICABLE = /no (tool|prompt) named "/;
let failedApplicable = 0;
if (existsSync(out))
  for (const entry of readdirSync(out).sort()) {
    const file = join(out, entry, 'checks.json');
    if (!existsSync(file)) continue;
    const checks = JSON.parse(readFileSync(file, 'utf8')) as Array<{ name?: string; id?: string; status: string; errorMessage?: string }>;
    const failures = checks.filter((c) => c.status === 'FAILURE');
    const scenario = entry.replace(/^server-/, '').replace(/-\d{4}-\d\d-\d\dT.*$/, '');
    const na = failures.length > 0 && failures.every((f) => NOT_APPLICABLE.test(f.errorMessage ?? ''));
    if (failures.length && !na) failedApplicable++;
    const verdict = failures.length === 0 ? 'pass' : na ? 'n/a ' : 'FAIL';
    const passed = checks.filter((c) => c.status === 'SUCCESS').length;
    console.log(`${verdict}  ${scenario} (${passed} checks passed)${failures.length ? `: ${failures.map((f) => (f.errorMessage ?? f.name ?? '').slice(0, 200)).join('; ')}` : ''}`);
  }

proxy.close();
await gw.close();
rmSync(dir, { recursive: true, force: true });
process.exit(code !== 0 && failedApplicable === 0 ? 0 : code || failedApplicable);
