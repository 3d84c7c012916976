import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigSchema, ENV_MAP } from '../../src/config.js';
import { renderConfigTable, renderEnvExample, TABLE_END, TABLE_START } from '../../src/config/docs.js';
import { declaredSettings } from '../../src/config/fields.js';

const ROOT = join(import.meta.dirname, '../../..');
const defaults = ConfigSchema.parse({}) as Record<string, unknown>;

/** Issue 24 item 7: the documented variables, keys and defaults come from the schema, never by hand. */
describe('configuration docs', () => {
  it("README's configuration table is the one the schema generates (npm run docs:config)", () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const table = readme.slice(readme.indexOf(TABLE_START) + TABLE_START.length + 1, readme.indexOf(TABLE_END) - 1);
    expect(table).toBe(renderConfigTable(ConfigSchema, defaults));
  });

  it('.env.example is the one the schema generates, and lists every variable once', () => {
    const text = readFileSync(join(ROOT, '.env.example'), 'utf8');
    expect(text).toBe(renderEnvExample(ConfigSchema, defaults));
    const listed = [...text.matchAll(/^#([A-Z][A-Z0-9_]*)=/gm)].map((m) => m[1]);
    expect(listed.sort()).toEqual(['GATEWAY_CONFIG', ...Object.keys(ENV_MAP)].sort());
  });

  it('every variable has a line of documentation, and each setting is listed once', () => {
    const settings = declaredSettings(ConfigSchema);
    expect(settings.filter((s) => s.env.length > 0 && !s.doc).map((s) => s.path.join('.'))).toEqual([]);
    const keys = settings.map((s) => s.path.join('.'));
    expect(new Set(keys).size).toBe(keys.length);
  });

  /** Variables other programs read, which the docs name on purpose: the xiaozhi MCP pipe's endpoint URL. */
  const NOT_OURS = new Set(['GATEWAY_CONFIG', 'MCP_ENDPOINT']);

  it('the docs, the compose file and the examples name only variables the gateway reads', () => {
    const files = [
      'README.md',
      'docker-compose.yml',
      'examples/cluster/haproxy.cfg',
      'examples/systemd/voxgate.service',
      ...readdirSync(join(ROOT, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
    ];
    const unknown = files.flatMap((f) =>
      [...readFileSync(join(ROOT, f), 'utf8').matchAll(/\b(?:GATEWAY|MCP)_[A-Z0-9_]*[A-Z0-9]\b/g)]
        .map((m) => m[0])
        .filter((name) => !NOT_OURS.has(name) && !(name in ENV_MAP))
        .map((name) => `${f}: ${name}`),
    );
    expect(unknown).toEqual([]);
  });

  it('the cluster profile trusts the load balancer that sets X-Forwarded-For (the docs say it does)', () => {
    expect(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8')).toMatch(/^\s+GATEWAY_TRUST_PROXY: uniquelocal$/m);
    expect(readFileSync(join(ROOT, 'examples/cluster/haproxy.cfg'), 'utf8')).toMatch(/^\s+http-request set-header X-Forwarded-For %\[src\]$/m);
  });
});
