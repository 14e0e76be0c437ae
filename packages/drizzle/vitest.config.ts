import { defineProject, mergeConfig } from 'vitest/config'
import shared from '../../vitest.shared.ts'

/** Drizzle 0.45 (the `drizzle-orm` install); `vitest.drizzle-1.config.ts` runs `test/v1` on 1.0. */
export default mergeConfig(
  shared,
  defineProject({
    test: { name: 'drizzle', include: ['test/**/*.test.ts'], exclude: ['test/v1/**'] },
  }),
)
