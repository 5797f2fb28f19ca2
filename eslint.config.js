// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * `npm run lint` = tsc --noEmit, then this, then the architecture check (scripts/architecture.ts).
 *
 * Not type-aware on purpose: typescript-eslint's type-checked set took ≈45 s of CPU on this 2-core machine
 * (≈4× the plain run) and its findings were almost all `no-unsafe-*` on DuckDB rows and JSON bodies typed
 * `unknown`/`any` at the edges; tsc --noEmit (strict) already runs first. Import cycles are not checked here
 * either: eslint-plugin-import-x `no-cycle` tripled the run's CPU time and ignores `import type` edges, while
 * scripts/architecture.ts (also test/scripts/architecture.test.ts) checks cycles, type-only edges included, in ≈1 s.
 */

/**
 * The import boundaries (scripts/architecture.ts checks the same on the resolved graph and names offenders):
 * only src/http/ imports Express; nothing outside src/http/ imports it but the composition root; src/ imports
 * nothing from bench/ or test/.
 */
function boundaries({ express = true, http = true, benchOrTest = false }) {
  const paths = express ? [{ name: 'express', message: 'Only src/http/ imports Express: the core knows nothing of HTTP.' }] : [];
  const patterns = [];
  // A relative specifier reaching into an http/ directory: `../http/x.js` from src/, `../src/http/x.js` from ingest/.
  if (http) patterns.push({ regex: '^\\.{1,2}/(.*/)?http/', message: 'Only src/http/ and the composition root (src/server.ts) import src/http/.' });
  if (benchOrTest) patterns.push({ regex: '^\\.{1,2}/(.*/)?(bench|test)/', message: 'src/ imports nothing from bench/ or test/.' });
  return ['error', { paths, patterns }];
}

export default tseslint.config(
  {
    ignores: ['node_modules/', 'lake/', 'state/', 'demo-data/', 'bench/lake/', 'bench/lake-*/', 'bench/data/', 'bench/data-*/', 'bench/results/', '.tmp/'],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { ecmaVersion: 2022, sourceType: 'module' },
    rules: {
      // tsc's noUnusedLocals/noUnusedParameters already fail on unused names; here only the `_` convention
      // they share (a deliberately unused binding, a rest sibling that drops a field) is allowed.
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          caughtErrorsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          ignoreRestSiblings: true,
        },
      ],
      eqeqeq: ['error', 'always', { null: 'ignore' }],
      'no-var': 'error',
      'prefer-const': 'error',
      'no-throw-literal': 'error',
      'no-restricted-imports': boundaries({}),
    },
  },
  // Later blocks override earlier ones for the files they match.
  // Tests and benches drive the HTTP layer directly (createApp, the route table), so they may import src/http/.
  { files: ['test/**/*.ts', 'bench/**/*.ts'], rules: { 'no-restricted-imports': boundaries({ http: false }) } },
  // The http-small scenario's deliberate baseline: a bare Express route.
  { files: ['bench/bare-express.ts'], rules: { 'no-restricted-imports': 'off' } },
  { files: ['src/**/*.ts'], rules: { 'no-restricted-imports': boundaries({ benchOrTest: true }) } },
  // The composition root wires the HTTP layer (it still does not import Express itself).
  { files: ['src/server.ts'], rules: { 'no-restricted-imports': boundaries({ http: false, benchOrTest: true }) } },
  { files: ['src/http/**/*.ts'], rules: { 'no-restricted-imports': boundaries({ express: false, http: false, benchOrTest: true }) } },
  // The service, ingest and the simulated venue log through pino (src/log.ts); CLI output goes through process.stdout.write.
  { files: ['src/**/*.ts', 'ingest/**/*.ts', 'sim/**/*.ts'], rules: { 'no-console': 'error' } },
  // Test bodies are JSON answers asserted field by field; typing each one would be churn without a check.
  { files: ['test/**/*.ts'], rules: { '@typescript-eslint/no-explicit-any': 'off' } },
);
