import tseslint from 'typescript-eslint';
import importX from 'eslint-plugin-import-x';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';
import { ARROWS, FOLDERS, LEAVES } from './eslint.arrows.js';

/**
 * The design's arrows (eslint.arrows.js) as one `no-restricted-imports` rule per gateway folder: an import
 * of a folder not in the folder's row is an error, whether a value or a type.
 */
function arrowRules() {
  return FOLDERS.map((folder) => {
    const allowed = new Map(ARROWS[folder].map((a) => (typeof a === 'string' ? [a, undefined] : [a.folder, a.only])));
    const patterns = [];
    for (const other of FOLDERS) {
      if (other === folder || LEAVES.includes(other)) continue;
      // Every folder's config.ts is a leaf (a schema slice over config/fields.ts): any part may take another's slice type.
      if (!allowed.has(other)) {
        patterns.push({
          group: [`**/${other}/**`, `!**/${folder}/**`, `!**/${other}/config.js`],
          message: `${folder}/ may not import ${other}/ (docs/architecture.md, eslint.arrows.js)`,
        });
      } else if (allowed.get(other)) {
        const leaves = allowed.get(other);
        patterns.push({
          group: [`**/${other}/**`, ...leaves.map((m) => `!**/${other}/${m}.js`), `!**/${other}/config.js`],
          message: `${folder}/ may import only ${leaves.map((m) => `${other}/${m}.ts`).join(', ')} from ${other}/ (docs/architecture.md)`,
        });
      }
    }
    const root = ['gateway', 'main', 'index'].flatMap((f) => [`../${f}.js`, `../../${f}.js`, `../../../${f}.js`]);
    patterns.push({ group: root, message: 'nothing imports the composition root' });
    return {
      files: [`gateway/src/${folder}/**/*.ts`],
      rules: { '@typescript-eslint/no-restricted-imports': ['error', { patterns }] },
    };
  });
}

/** One forbidden group of imports, as a rules object. */
function restrict(group, message) {
  return { '@typescript-eslint/no-restricted-imports': ['error', { patterns: [{ group, message }] }] };
}

/** `import-x/no-cycle` on the given files, TypeScript paths resolved as tsc does (`./x.js` is `./x.ts`). */
export function cycleCheck(files) {
  return {
    files,
    plugins: { 'import-x': importX },
    settings: {
      ...importX.flatConfigs.typescript.settings,
      'import-x/resolver': undefined,
      'import-x/resolver-next': [
        createTypeScriptImportResolver({ project: ['gateway/tsconfig.json', 'protocol/tsconfig.json'], noWarnOnMultipleProjects: true }),
      ],
    },
    rules: { 'import-x/no-cycle': ['error', { ignoreExternal: true }] },
  };
}

export default tseslint.config(
  {
    ignores: ['**/node_modules/**', '**/.tsbuild/**', '**/dist/**', 'firmware/**', 'bench/results/**', 'coverage/**'],
  },
  // Fixtures that break the rules on purpose (gateway/test/lint/architecture-lint.test.ts lints them itself).
  { ignores: ['gateway/test/fixtures/lint/**'] },
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts', '**/*.tsx'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'no-console': 'error',
      eqeqeq: ['error', 'smart'],
    },
  },
  { files: ['**/test/**/*.ts', 'bench/**/*.ts'], rules: { 'no-console': 'off' } },
  ...arrowRules(),
  // No import cycle between files (type-only imports are erased at run time, and the rule skips them).
  cycleCheck(['gateway/src/**/*.ts', 'protocol/src/**/*.ts']),
  // Small files and functions (docs/architecture.md): a longer one says why on the line before it.
  {
    files: ['gateway/src/**/*.ts', 'protocol/src/**/*.ts'],
    rules: {
      'max-lines': ['error', { max: 420, skipBlankLines: true, skipComments: true }],
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }],
    },
  },
  // The wire package, the console and the sample servers stand alone.
  {
    files: ['protocol/src/**/*.ts'],
    rules: restrict(['**/gateway/**', '@voxgate/gateway'], 'protocol/ is the wire only: it imports no gateway code'),
  },
  {
    files: ['console/src/**/*.ts', 'console/src/**/*.tsx'],
    rules: restrict(['**/gateway/**', '**/protocol/**', '@voxgate/*'], 'the console talks to the gateway only through its HTTP API'),
  },
  {
    files: ['mcp_servers/**/*.ts'],
    rules: restrict(['**/gateway/**', '**/protocol/**', '@voxgate/*'], 'the sample MCP servers stand alone'),
  },
  {
    files: ['gateway/**/*.ts', 'protocol/**/*.ts', 'console/**/*.ts', 'console/**/*.tsx', 'bench/**/*.ts', 'test/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ group: ['**/mcp_servers/**'], message: 'nothing imports mcp_servers' }] }] },
  },
);
