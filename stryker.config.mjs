// @ts-check
/**
 * Mutation testing (`pnpm mutate`): StrykerJS changes the code that decides an ID and its shard
 * (layout and codec, shard keys, sharding, supplied IDs, batching, the in-process source, and the
 * adapters' placement) one small change at a time, and reports each change no test noticed.
 * Run a part with `pnpm mutate --mutate packages/core/src/shard-key.ts`.
 * @type {import('@stryker-mutator/api/core').PartialStrykerOptions}
 */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'vitest.mutants.config.ts', related: true },
  coverageAnalysis: 'perTest',
  plugins: ['@stryker-mutator/vitest-runner'],
  mutate: [
    'packages/core/src/layout.ts',
    'packages/core/src/layout-options.ts',
    'packages/core/src/id-value.ts',
    'packages/core/src/shard-key.ts',
    'packages/core/src/sharding.ts',
    'packages/core/src/supplied-ids.ts',
    'packages/core/src/id-source.ts',
    'packages/core/src/in-process-source.ts',
    'packages/typeorm/src/placement.ts',
    'packages/prisma/src/plan.ts',
    'packages/prisma/src/walk.ts',
    'packages/mikro-orm/src/placement.ts',
  ],
  ignorePatterns: ['**/dist', 'examples', 'bench-charts', 'faults', 'readme-check', 'reports'],
  concurrency: 1,
  // Mutants in module-level code (constants, presets) rerun every test for each: skipped.
  ignoreStatic: true,
  timeoutMS: 60_000,
  reporters: ['html', 'json', 'clear-text', 'progress'],
  htmlReporter: { fileName: 'reports/mutation/index.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
}
