/**
 * `npm run conformance`: the official MCP conformance suite's server scenarios against a started gateway.
 *
 * The suite needs Node >= 22 and has no option for a header, so: a gateway on 127.0.0.1:0 hosting the
 * suite's fixture server (conformance-server.mjs) as "conformance", a pass-through that adds the API key and
 * maps the suite's bare tool and prompt names onto the gateway's namespaced ones (`mcp__conformance__*`;
 * it keeps the caller's Host, so the DNS-rebinding scenario reaches the gateway's own check), and the suite
 * run by Node 22 from the npm `node` package. Every scenario then goes through the gateway and the hub.
 * Both are npm packages fetched by npx into its cache (CONFORMANCE_VERSION, CONFORMANCE_NODE to change;
 * CONFORMANCE_SUITE=all adds the suite's pending scenarios).
 * Prints one line per scenario; exits non-zero when one fails.
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
const FIXTURE = fileURLToPath(new URL('./conformance-server.mjs', import.meta.url));
/** The hosted fixture's namespace: the suite's bare tool and prompt names are mapped onto it. */
const PREFIX = 'mcp__conformance__';

const dir = mkdtempSync(join(tmpdir(), 'voxgate-conformance-'));
writeFileSync(join(dir, 'gateway.config.json'), '{}');
const config = loadConfig(
  { GATEWAY_CONFIG: join(dir, 'gateway.config.json') },
  {
    dataDir: dir,
    apiKeys: [KEY],
    http: { host: '127.0.0.1', port: 0 },
    mqtt: { enabled: false },
    mcp: { deviceTools: 'per_device', servers: { conformance: { command: process.execPath, args: [FIXTURE] } } },
  },
);
const gw = await startGateway(config, { log: createLogger('warn') });
await gw.hubStarted;

/** Bare names in a request from the suite -> the gateway's namespaced ones. */
function mapRequest(body: string): string {
  if (!body) return body;
  let msg: unknown;
  try {
    msg = JSON.parse(body);
  } catch {
    return body;
  }
  for (const m of Array.isArray(msg) ? msg : [msg]) {
    const p = (m as { method?: string; params?: { name?: unknown; ref?: { type?: string; name?: unknown } } }).params;
    const method = (m as { method?: string }).method;
    if ((method === 'tools/call' || method === 'prompts/get') && typeof p?.name === 'string') p.name = PREFIX + p.name;
    if (method === 'completion/complete' && p?.ref?.type === 'ref/prompt' && typeof p.ref.name === 'string') p.ref.name = PREFIX + p.ref.name;
  }
  return JSON.stringify(msg);
}

// The pass-through: every request gets the API key and bare names are namespaced; answers get the bare
// names back. Everything else, Host included, is passed as sent (the DNS-rebinding scenario needs that).
const proxy = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = mapRequest(Buffer.concat(chunks).toString('utf8'));
    const headers = { ...req.headers, authorization: `Bearer ${KEY}` };
    delete headers['content-length'];
    if (body) headers['content-length'] = String(Buffer.byteLength(body));
    const up = request({ host: '127.0.0.1', port: gw.httpPort, method: req.method, path: req.url, headers }, (r) => {
      const out = { ...r.headers };
      delete out['content-length'];
      res.writeHead(r.statusCode ?? 502, out);
      // SSE events and JSON bodies arrive whole per write: the prefix never straddles two chunks.
      r.on('data', (c: Buffer) => res.write(c.toString('utf8').replaceAll(PREFIX, '')));
      r.on('end', () => res.end());
    });
    up.on('error', () => res.destroy());
    up.end(body);
  });
});
await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
const port = (proxy.address() as { port: number }).port;

const out = join(dir, 'results');
// npx puts both packages' bins on PATH: `node` is Node 22, `conformance` the suite.
const which = process.env['CONFORMANCE_SUITE'] ?? 'active';
const suite = `node "$(command -v conformance)" server --suite ${which} --url http://localhost:${port}/mcp -o ${out}`;
const code = await new Promise<number>((resolve) => {
  const sh = spawn('npx', ['-y', '-p', `node@${NODE}`, '-p', `@modelcontextprotocol/conformance@${VERSION}`, '-c', suite], { stdio: 'inherit' });
  sh.on('exit', (c) => resolve(c ?? 1));
});

let failed = 0;
if (existsSync(out))
  for (const entry of readdirSync(out).sort()) {
    const file = join(out, entry, 'checks.json');
    if (!existsSync(file)) continue;
    const checks = JSON.parse(readFileSync(file, 'utf8')) as Array<{ name?: string; id?: string; status: string; errorMessage?: string }>;
    const failures = checks.filter((c) => c.status === 'FAILURE');
    const scenario = entry.replace(/^server-/, '').replace(/-\d{4}-\d\d-\d\dT.*$/, '');
    if (failures.length) failed++;
    const verdict = failures.length === 0 ? 'pass' : 'FAIL';
    const passed = checks.filter((c) => c.status === 'SUCCESS').length;
    const warnings = checks.filter((c) => c.status === 'WARNING');
    const notes = [...failures, ...warnings].map((f) => `${f.status}: ${(f.errorMessage ?? f.name ?? '').slice(0, 200)}`);
    console.log(`${verdict}  ${scenario} (${passed} checks passed, ${warnings.length} warnings)${notes.length ? `\n      ${notes.join('\n      ')}` : ''}`);
  }

proxy.close();
await gw.close();
rmSync(dir, { recursive: true, force: true });
process.exit(code || failed);
