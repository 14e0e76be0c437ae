import { defineConfig, mergeConfig } from 'vitest/config'
import shared from '../vitest.shared.ts'

/**
 * The fault suite: its own run (`pnpm --filter @shardflake/faults test`), not a project of the
 * root config. Files run one after another (each starts and kills its own servers; two cores),
 * with long timeouts; `globalSetup` merges what every file issued and writes the figures.
 */
export default mergeConfig(
  shared,
  defineConfig({
    test: {
      name: 'faults',
      include: ['test/**/*.test.ts'],
      fileParallelism: false,
      testTimeout: 240_000,
      hookTimeout: 120_000,
      // The global teardown sorts every ID of the run (tens of millions) on the main thread.
      teardownTimeout: 60_000,
      globalSetup: ['./test/global-setup.ts'],
    },
  }),
)
