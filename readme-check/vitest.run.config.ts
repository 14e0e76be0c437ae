import { defineConfig, mergeConfig } from 'vitest/config'
import shared from '../vitest.shared.ts'

/**
 * The quick-start runner (`pnpm test:readmes`, and a step of `.ci/run`): not a project of the
 * root config, because it packs the packages and installs from the npm registry. Quick starts
 * run one after another (two cores; each may start servers of its own).
 */
export default mergeConfig(
  shared,
  defineConfig({
    test: {
      name: 'readmes',
      include: ['run/**/*.test.ts'],
      fileParallelism: false,
      testTimeout: 600_000,
      hookTimeout: 300_000,
    },
  }),
)
