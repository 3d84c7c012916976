/**
 * `npm run docs:config`: write README.md's configuration table and .env.example from the schema.
 * `npm run docs:config -- --check`: exit 1 when either differs from what the schema says.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigSchema } from '../gateway/src/config.js';
import { renderConfigTable, renderEnvExample, withConfigTable } from '../gateway/src/config/docs.js';

const root = join(import.meta.dirname, '..');
const defaults = ConfigSchema.parse({}) as Record<string, unknown>;
const files = {
  'README.md': (text: string) => withConfigTable(text, renderConfigTable(ConfigSchema, defaults)),
  '.env.example': () => renderEnvExample(ConfigSchema, defaults),
};
const check = process.argv.includes('--check');
let stale = 0;
for (const [name, render] of Object.entries(files)) {
  const path = join(root, name);
  const before = readFileSync(path, 'utf8');
  const after = render(before);
  if (after === before) continue;
  stale++;
  if (check) process.stderr.write(`${name} differs from the schema: run npm run docs:config\n`);
  else writeFileSync(path, after);
}
if (check && stale) process.exit(1);
process.stdout.write(check ? 'configuration docs match the schema\n' : `configuration docs written (${stale} changed)\n`);
