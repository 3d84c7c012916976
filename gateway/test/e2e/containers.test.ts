import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import dockerignore from '@balena/dockerignore';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { DockerfileParser, type Copy, type Env, type Instruction, type JSONInstruction } from 'dockerfile-ast';
import { validate as lintDockerfile } from 'dockerfile-utils';
import { describe, expect, it } from 'vitest';
import { parseDocument } from 'yaml';
import { ROOT, isolatedEnv, startCompiledGateway } from '../../../test/support/gateway-process.js';
import { ConfigSchema } from '../../src/config.js';
import { createTestPki } from '../../../test/support/tls-certs.js';

// No Docker engine runs on the test machines: the container files are checked by parsing them with the
// tools Docker's own ecosystem uses (the Compose Specification schema, the Dockerfile language service's
// linter, Docker's .dockerignore matcher, haproxy -c), and the image's health check runs for real.

const run = promisify(execFile);
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const rootPackage = JSON.parse(read('package.json')) as { scripts: Record<string, string>; workspaces: string[] };

// ---------------------------------------------------------------------------------------------- compose
type Service = {
  profiles?: string[];
  ports?: string[];
  volumes?: string[];
  environment?: Record<string, string>;
  depends_on?: string[] | Record<string, unknown>;
  command?: string[];
  image?: string;
};
type ComposeFile = { services: Record<string, Service>; volumes?: Record<string, unknown> };

function loadCompose(text: string): ComposeFile {
  // YAML merge keys (<<) are part of the Compose format; the parser must report no error or warning.
  const doc = parseDocument(text, { merge: true });
  expect([...doc.errors, ...doc.warnings].map((e) => e.message)).toEqual([]);
  return doc.toJS({ maxAliasCount: 100 }) as ComposeFile;
}

const composeSchema = JSON.parse(read('gateway/test/fixtures/compose-spec/compose-spec.json')) as object;
const validateCompose = new Ajv2020({ allErrors: true, strict: false }).compile(composeSchema);
const schemaErrors = (doc: unknown) => (validateCompose(doc) ? [] : (validateCompose.errors ?? []).map((e) => `${e.instancePath} ${e.message ?? ''}`));

const dependsOn = (s: Service) => (Array.isArray(s.depends_on) ? s.depends_on : Object.keys(s.depends_on ?? {}));
const namedVolume = (spec: string) => spec.split(':')[0]!;
const isBindMount = (spec: string) => /^[./~]/.test(spec);
const hostPort = (spec: string) => spec.split(':')[0]!;

describe('docker-compose.yml', () => {
  const text = read('docker-compose.yml');
  const compose = loadCompose(text);
  const services = compose.services;
  const cluster = Object.entries(services).filter(([, s]) => s.profiles?.includes('cluster'));

  it('is valid against the Compose Specification schema (the one docker compose v2 validates with)', () => {
    expect(schemaErrors(compose)).toEqual([]);
    // What compose validates is the file after variable interpolation: without variables, that is this file.
    expect(text).not.toMatch(/\$\{?[A-Za-z_]/);
  });

  it('the schema check bites: misspelled keys and wrong types are rejected', () => {
    const broken = loadCompose(text.replace('    ports:\n', '    port:\n').replace('stop_grace_period: 15s', 'stop_grace_period: [15]'));
    const errors = schemaErrors(broken);
    expect(errors.some((e) => /must NOT have additional properties/.test(e))).toBe(true);
    expect(errors.some((e) => e.includes('/stop_grace_period'))).toBe(true);
  });

  it('references only what exists: services it depends on, declared volumes, files it mounts', () => {
    for (const [name, s] of Object.entries(services)) {
      for (const dep of dependsOn(s)) {
        expect(services[dep], `${name} depends on ${dep}`).toBeDefined();
        // A service of the cluster profile may only wait for services that run with that profile.
        if (s.profiles) expect(services[dep]!.profiles ?? s.profiles, `${name} -> ${dep}`).toEqual(s.profiles);
      }
      for (const v of s.volumes ?? []) {
        if (isBindMount(v)) expect(existsSync(join(ROOT, namedVolume(v))), `${name} mounts ${v}`).toBe(true);
        else expect(Object.keys(compose.volumes ?? {}), `${name} uses volume ${v}`).toContain(namedVolume(v));
      }
    }
  });

  it('the gateway: the data volume at the image data dir, and the ports the config listens on', () => {
    const gw = services['gateway']!;
    expect(gw.profiles).toBeUndefined(); // `docker compose up` starts it
    expect(gw.environment?.['GATEWAY_DATA_DIR']).toBe(dockerfile().env.get('GATEWAY_DATA_DIR'));
    expect(gw.volumes?.some((v) => v.endsWith(`:${gw.environment?.['GATEWAY_DATA_DIR']}`))).toBe(true);
    const defaults = ConfigSchema.parse({});
    expect(gw.ports).toEqual(
      expect.arrayContaining([`${defaults.http.port}:${defaults.http.port}`, `${defaults.mqtt.port}:${defaults.mqtt.port}`, '8883:8883', '8884:8884/udp']),
    );
  });

  it('the cluster profile: NATS with JetStream, three gateway instances with their own data, a load balancer in front', () => {
    const names = cluster.map(([n]) => n);
    const nats = services['nats']!;
    expect(names).toContain('nats');
    expect(nats.command).toContain('--jetstream');

    const gateways = cluster.filter(([, s]) => s.environment?.['GATEWAY_CLUSTER_INSTANCE_ID'] !== undefined);
    expect(gateways).toHaveLength(3);
    expect(new Set(gateways.map(([, s]) => s.environment?.['GATEWAY_CLUSTER_INSTANCE_ID'])).size).toBe(3);
    expect(new Set(gateways.map(([, s]) => s.volumes?.join()))).toHaveProperty('size', 3);
    for (const [name, s] of gateways) {
      expect(s.environment?.['GATEWAY_CLUSTER_NATS_SERVERS'], name).toMatch(/^nats:\/\/nats:4222$/);
      expect(dependsOn(s), name).toContain('nats');
      expect(s.ports, `${name} is reached through the load balancer only`).toBeUndefined();
    }

    // The load balancer's config names exactly these instances, on the HTTP and both MQTT ports.
    const lb = services['lb']!;
    const cfgMount = lb.volumes!.find(isBindMount)!;
    const cfg = read(namedVolume(cfgMount));
    const servers = [...cfg.matchAll(/^\s*server\s+\S+\s+([\w-]+):(\d+)/gm)].map((m) => `${m[1]}:${m[2]}`);
    const expected = gateways.flatMap(([n]) => ['8000', '1883', '8883'].map((p) => `${n}:${p}`));
    expect(servers.sort()).toEqual(expected.sort());
    expect(dependsOn(lb).sort()).toEqual(gateways.map(([n]) => n).sort());
  });

  it('every published host port is distinct, so the cluster profile can run next to the single gateway', () => {
    const published = Object.values(services).flatMap((s) => (s.ports ?? []).map((p) => `${hostPort(p)}/${p.endsWith('/udp') ? 'udp' : 'tcp'}`));
    expect(published.length).toBeGreaterThan(0);
    expect(new Set(published).size).toBe(published.length);
  });
});

// ------------------------------------------------------------------------------------------- Dockerfile
interface Stage {
  name: string | null;
  image: string;
  instructions: Instruction[];
}

function dockerfile() {
  const text = read('Dockerfile');
  const parsed = DockerfileParser.parse(text);
  const stages: Stage[] = [];
  for (const i of parsed.getInstructions()) {
    if (i.getKeyword() === 'FROM') {
      const from = parsed.getFROMs().find((f) => f.getRange().start.line === i.getRange().start.line)!;
      stages.push({ name: from.getBuildStage(), image: from.getImage() ?? '', instructions: [] });
    } else {
      stages.at(-1)?.instructions.push(i);
    }
  }
  const runtime = stages.at(-1)!;
  const only = (stage: Stage, keyword: string) => stage.instructions.filter((i) => i.getKeyword() === keyword);
  const json = (i: Instruction) => (i as JSONInstruction).getJSONStrings().map((s) => s.getJSONValue());
  const env = new Map(only(runtime, 'ENV').flatMap((i) => (i as Env).getProperties().map((p) => [p.getName(), p.getValue() ?? ''] as const)));
  /** A COPY's --from stage, undefined for a copy from the build context. */
  const copyFrom = (i: Instruction) => (i as Copy).getFromFlag()?.getValue() ?? undefined;
  return { text, stages, runtime, only, json, env, copyFrom };
}

describe('Dockerfile', () => {
  const df = dockerfile();
  const { runtime, only, json, copyFrom } = df;

  it('passes the Dockerfile linter of the Docker language service (dockerfile-utils) with no finding', () => {
    expect(lintDockerfile(df.text).map((d) => `line ${d.range.start.line + 1}: ${d.message}`)).toEqual([]);
    // The linter bites: an unknown instruction and a bad EXPOSE protocol are reported.
    expect(lintDockerfile(df.text.replace('USER ', 'USR ').replace('8884/udp\n', '8884/udpx\n'))).toHaveLength(2);
  });

  it('is multi-stage: dev dependencies and the build in one stage, production dependencies + dist in a slim runtime', () => {
    expect(df.stages.length).toBeGreaterThanOrEqual(2);
    const build = df.stages.find((s) => s.name === 'build')!;
    const runs = (s: Stage) => only(s, 'RUN').map((i) => i.getArgumentsContent() ?? '');
    expect(runs(build)).toEqual(expect.arrayContaining([expect.stringMatching(/^npm ci\b(?!.*--omit=dev)/), 'npm run build']));
    expect(runs(runtime).some((r) => /npm ci --omit=dev/.test(r))).toBe(true);
    expect(runtime.image).toMatch(/^node:.*(slim|alpine)/);
    // The runtime gets the build's dist/ of every workspace and nothing else from it.
    const fromBuild = only(runtime, 'COPY').filter((c) => copyFrom(c) === 'build');
    expect(fromBuild.map((c) => c.getArguments().at(-1)?.getValue()).sort()).toEqual(rootPackage.workspaces.map((w) => `${w}/dist`).sort());
  });

  it('runs as a non-root user, with the data directory as a volume', () => {
    const user = only(runtime, 'USER').at(-1)?.getArgumentsContent() ?? 'root';
    expect(user.split(':')[0]).not.toMatch(/^(root|0)$/);
    const volume = json(only(runtime, 'VOLUME').at(-1)!);
    expect(volume).toEqual([df.env.get('GATEWAY_DATA_DIR')]);
  });

  it('exposes the HTTP, MQTT, MQTT-over-TLS and voice UDP ports; the first two are the config defaults', () => {
    const exposed = only(runtime, 'EXPOSE').flatMap((i) => i.getArguments().map((a) => a.getValue()));
    const defaults = ConfigSchema.parse({});
    expect(exposed).toEqual(expect.arrayContaining([`${defaults.http.port}/tcp`, `${defaults.mqtt.port}/tcp`, '8883/tcp', '8884/udp']));
  });

  it('signals reach node: tini is PID 1, and the command is package.json start without npm, its environment included', () => {
    expect(json(only(runtime, 'ENTRYPOINT').at(-1)!)).toEqual(['/usr/bin/tini', '--']);
    // `[NAME=value ...] exec node [options] gateway/dist/main.js`
    const [, assignments, command] = /^((?:[A-Z_][A-Z0-9_]*=\S*\s+)*)exec\s+(.*)$/.exec(rootPackage.scripts['start']!.trim())!;
    expect(json(only(runtime, 'CMD').at(-1)!)).toEqual(command!.split(/\s+/));
    const wanted = assignments!.split(/\s+/).filter(Boolean);
    expect(wanted.map((kv) => `${kv.slice(0, kv.indexOf('='))}=${df.env.get(kv.slice(0, kv.indexOf('='))) ?? ''}`)).toEqual(wanted);
  });

  it('HEALTHCHECK runs the compiled health check of the gateway sources', () => {
    const hc = only(runtime, 'HEALTHCHECK').at(-1)!.getArgumentsContent() ?? '';
    const cmd = JSON.parse(/\bCMD\s+(\[.*\])\s*$/s.exec(hc)![1]!) as string[];
    expect(cmd[0]).toBe('node');
    const script = cmd[1]!;
    expect(script).toMatch(/^gateway\/dist\/.*\.js$/);
    expect(existsSync(join(ROOT, script.replace('gateway/dist/', 'gateway/src/').replace(/\.js$/, '.ts')))).toBe(true);
  });

  it('every file it copies from the context exists and is not excluded by .dockerignore', () => {
    // A CommonJS module under NodeNext: its factory is the default export's `default` (the package sets both).
    const ignored = dockerignore.default().add(read('.dockerignore').split('\n'));
    const contextSources = (s: Stage) =>
      only(s, 'COPY')
        .filter((c) => copyFrom(c) === undefined)
        .flatMap((c) =>
          c
            .getArguments()
            .slice(0, -1)
            .map((a) => a.getValue()),
        );
    const sources = df.stages.flatMap(contextSources);
    expect(sources.length).toBeGreaterThan(5);
    for (const src of sources) {
      expect(existsSync(join(ROOT, src)), src).toBe(true);
      expect(ignored.ignores(src), `${src} is excluded by .dockerignore`).toBe(false);
    }
    // Each workspace's manifest is in both stages: npm ci needs every workspace the lock file names.
    for (const s of df.stages) for (const w of rootPackage.workspaces) expect(contextSources(s), `${w} in ${s.name}`).toContain(`${w}/package.json`);
    // Secrets and local state never reach the build context.
    for (const secret of ['.env', 'data/secrets.json', 'gateway.config.json', 'node_modules/x', 'gateway/dist/main.js'])
      expect(ignored.ignores(secret), secret).toBe(true);
    expect(ignored.ignores('.env.example')).toBe(false);
  });
});

// --------------------------------------------------------------------------------------- load balancer
describe('examples/cluster/haproxy.cfg', () => {
  it('haproxy -c accepts it (Debian haproxy; service names resolve only inside compose)', async () => {
    const haproxy = ['/usr/sbin/haproxy', '/usr/bin/haproxy'].find(existsSync);
    expect(haproxy, 'haproxy is missing: apt-get install -y haproxy (see .ci/run)').toBeDefined();
    const { stdout, stderr } = await run(haproxy!, ['-c', '-f', join(ROOT, 'examples/cluster/haproxy.cfg')]);
    expect(stdout + stderr).toContain('Configuration file is valid');
    const warnings = stderr.split('\n').filter((l) => l.includes('[WARNING]'));
    expect(warnings.filter((l) => !/could not resolve address 'gateway-\d'/.test(l))).toEqual([]);
  });

  it("its HTTP frontend hands the gateways the device's own address, whatever X-Forwarded-For the device sent", async () => {
    // The cluster profile trusts the private ranges, where LAN devices live too: an appended header (option
    // forwardfor) let such a device name the address its budgets are kept under. The frontend's header rules run
    // in a real haproxy in front of a server that echoes what reached it.
    const haproxy = ['/usr/sbin/haproxy', '/usr/bin/haproxy'].find(existsSync)!;
    const cfg = read('examples/cluster/haproxy.cfg');
    const frontend = cfg.slice(cfg.indexOf('frontend http\n'), cfg.indexOf('\nbackend gateways_http'));
    const rules = frontend.split('\n').filter((l) => /^\s+(http-request|option forwardfor)/.test(l));
    expect(rules.length).toBeGreaterThan(0);
    const seen: IncomingHttpHeaders[] = [];
    const echo = createServer((req, res) => {
      seen.push(req.headers);
      res.end('ok');
    });
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-haproxy-'));
    let proxy: ChildProcess | undefined;
    try {
      const port = await freePort();
      const conf = join(dir, 'haproxy.cfg');
      writeFileSync(
        conf,
        [
          'defaults',
          '    mode http',
          '    timeout connect 5s',
          '    timeout client 30s',
          '    timeout server 30s',
          'frontend http',
          `    bind 127.0.0.1:${port}`,
          ...rules,
          '    default_backend echo',
          'backend echo',
          `    server echo 127.0.0.1:${(echo.address() as AddressInfo).port}`,
          '',
        ].join('\n'),
      );
      proxy = spawn(haproxy, ['-db', '-f', conf], { stdio: ['ignore', 'ignore', 'pipe'] });
      const exited = new Promise<never>((_, reject) => proxy!.once('exit', (code) => reject(new Error(`haproxy exited (${code})`))));
      exited.catch(() => undefined); // its exit at the end (the kill below) is no failure of the test
      const forged = { 'x-forwarded-for': '10.9.9.9', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'evil.example', forwarded: 'for=10.9.9.9' };
      await Promise.race([exited, untilServed(port, forged)]);
      const h = seen.at(-1)!;
      expect(h['x-forwarded-for']).toBe('127.0.0.1');
      expect(h['x-forwarded-proto']).toBe('http');
      expect(h['x-forwarded-host']).toBeUndefined();
      expect(h.forwarded).toBeUndefined();
    } finally {
      proxy?.kill();
      echo.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

/** A port nobody listens on now (haproxy cannot be asked for port 0's choice). */
async function freePort(): Promise<number> {
  const s = createNetServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

/** GET / through the proxy once it listens (refused until then: haproxy says nothing when it is up). */
async function untilServed(port: number, headers: Record<string, string>): Promise<void> {
  for (;;) {
    const res = await fetch(`http://127.0.0.1:${port}/`, { headers }).catch(() => undefined);
    if (res) {
      expect(res.status).toBe(200);
      return;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

// ------------------------------------------------------------------------------------------ health check
describe('the image health check (gateway/dist/cli/healthcheck.js)', () => {
  const HEALTHCHECK = join(ROOT, 'gateway/dist/cli/healthcheck.js');
  const check = (env: Record<string, string>) => {
    try {
      execFileSync(process.execPath, [HEALTHCHECK], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
      return { code: 0, stderr: '' };
    } catch (e) {
      const err = e as { status: number | null; stderr: Buffer };
      return { code: err.status, stderr: err.stderr.toString() };
    }
  };

  it('exits 0 while the gateway is ready, 1 once it is gone; it reads the port from the same config', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-health-'));
    writeFileSync(join(dir, 'gateway.config.json'), '{}');
    const env = isolatedEnv(dir, { GATEWAY_API_KEYS: 'health-test-key', GATEWAY_LOG_LEVEL: 'info' });
    const gw = startCompiledGateway(env);
    try {
      const started = (await gw.logLine('voxgate started')) as { http: string };
      const port = started.http.split(':').at(-1)!;
      // The gateway listens on 127.0.0.1 here; the check follows GATEWAY_HTTP_HOST and GATEWAY_HTTP_PORT.
      expect(check({ ...env, GATEWAY_HTTP_PORT: port })).toEqual({ code: 0, stderr: '' });

      gw.child.kill('SIGTERM');
      expect(await gw.exited).toEqual({ code: 0, signal: null });
      const after = check({ ...env, GATEWAY_HTTP_PORT: port });
      expect(after.code).toBe(1);
      expect(after.stderr).toMatch(/^unhealthy: /);
    } finally {
      gw.child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('follows the gateway onto HTTPS when TLS is configured', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-health-tls-'));
    writeFileSync(join(dir, 'gateway.config.json'), '{}');
    const cert = createTestPki(dir).issue('voxgate-health');
    const env = isolatedEnv(dir, {
      GATEWAY_API_KEYS: 'health-test-key',
      GATEWAY_LOG_LEVEL: 'info',
      GATEWAY_TLS_CERT_FILE: cert.certFile,
      GATEWAY_TLS_KEY_FILE: cert.keyFile,
      GATEWAY_TLS_MQTT_PORT: '0',
    });
    const gw = startCompiledGateway(env);
    try {
      const started = (await gw.logLine('voxgate started')) as { http: string };
      const port = started.http.split(':').at(-1)!;
      expect(check({ ...env, GATEWAY_HTTP_PORT: port })).toEqual({ code: 0, stderr: '' });
      // Plain HTTP to the HTTPS port is no answer: the check must not pass by accident without TLS.
      const { GATEWAY_TLS_CERT_FILE: _c, GATEWAY_TLS_KEY_FILE: _k, ...plain } = env;
      expect(check({ ...plain, GATEWAY_HTTP_PORT: port }).code).toBe(1);
    } finally {
      gw.child.kill('SIGKILL');
      await gw.exited;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('exits 1 with the reason when the configuration cannot be loaded', () => {
    const r = check({ GATEWAY_CONFIG: '/nonexistent/voxgate.json' });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^unhealthy: .*\/nonexistent\/voxgate\.json/s);
  });
});
