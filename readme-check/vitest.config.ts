import { defineProject, mergeConfig } from 'vitest/config'
import shared from '../vitest.shared.ts'

/**
 * The part of `pnpm test`: the markers of every README parse, name known variants, and every
 * README with a quick start is one the runner knows. The runner itself (`run/`) has its own
 * config, `vitest.run.config.ts`.
 */
export default mergeConfig(
  shared,
  defineProject({ test: { name: 'readme-check', include: ['test/**/*.test.ts'] } }),
)
