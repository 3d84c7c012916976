import { fileURLToPath } from 'node:url';
import { ESLint, type Linter } from 'eslint';
import { describe, expect, it } from 'vitest';

/** The design's arrows and the no-cycle rule, run through ESLint's API exactly as `npm run lint` runs them. */
const root = fileURLToPath(new URL('../../../', import.meta.url));

/** The lint configuration is plain JavaScript without types: its one helper is typed here. */
const CONFIG_FILE = '../../../eslint.config.js';
const { cycleCheck } = (await import(CONFIG_FILE)) as { cycleCheck: (files: string[]) => Linter.Config };

async function lint(code: string, filePath: string): Promise<ESLint.LintResult> {
  const [result] = await new ESLint({ cwd: root }).lintText(code, { filePath });
  return result!;
}

const restricted = (r: ESLint.LintResult) => r.messages.filter((m) => m.ruleId === '@typescript-eslint/no-restricted-imports').map((m) => m.message);

// Loading ESLint and the TypeScript parser cold takes seconds, many on a busy machine.
describe('lint keeps the design arrows', { timeout: 120_000 }, () => {
  it('refuses an import against an arrow (hub/ may not import voice/, nor the composition root)', async () => {
    const code = ["import { startVoice } from '../voice/start.js';", "import { startGateway } from '../gateway.js';", 'export { startVoice, startGateway };'];
    const r = await lint(code.join('\n'), 'gateway/src/hub/forbidden.ts');
    expect(restricted(r)).toEqual([expect.stringContaining('hub/ may not import voice/'), expect.stringContaining('nothing imports the composition root')]);
  });

  it('lets a folder import along its arrows and the leaves', async () => {
    const code = [
      "import type { DeviceRegistry } from '../devices/registry.js';",
      "import { KeyedTokenBucket } from '../throttle/token-bucket.js';",
      'export type { DeviceRegistry };',
      'export { KeyedTokenBucket };',
    ];
    const r = await lint(code.join('\n'), 'gateway/src/hub/allowed.ts');
    expect(restricted(r)).toEqual([]);
  });

  it('lets a route plugin outside api/ import only the leaf modules of api/', async () => {
    const ok = await lint("import { parseDeviceId } from '../api/route-helpers.js';\nexport { parseDeviceId };\n", 'gateway/src/vision/allowed.ts');
    expect(restricted(ok)).toEqual([]);
    const bad = await lint("import { deviceRoutes } from '../api/devices.js';\nexport { deviceRoutes };\n", 'gateway/src/vision/forbidden.ts');
    expect(restricted(bad)).toEqual([expect.stringContaining('vision/ may import only api/schemas.ts, api/route-helpers.ts')]);
  });

  it('keeps the console to HTTP', async () => {
    const r = await lint("import type { Device } from '../../../gateway/src/api/schemas.js';\nexport type { Device };\n", 'console/src/lib/forbidden.ts');
    expect(restricted(r)).toEqual([expect.stringContaining('only through its HTTP API')]);
  });

  it('refuses an import cycle between files', async () => {
    // The fixtures are outside the lint's own files (they hold a cycle on purpose): the same rule is applied to them.
    const eslint = new ESLint({ cwd: root, ignore: false, overrideConfig: [cycleCheck(['gateway/test/fixtures/lint/**/*.ts'])] });
    const results = await eslint.lintFiles(['gateway/test/fixtures/lint/cycle/first.ts']);
    expect(results[0]!.messages.map((m) => m.ruleId)).toContain('import-x/no-cycle');
  });
});
