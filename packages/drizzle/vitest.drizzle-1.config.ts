import { defineProject, mergeConfig } from 'vitest/config'
import shared from '../../vitest.shared.ts'

/**
 * `test/v1` on Drizzle 1.0: every `drizzle-orm` import, the adapter's and the tests', resolves to
 * the `drizzle-orm-1` install (1.0.0-rc), as in an application that has only 1.0.
 */
export default mergeConfig(
  shared,
  defineProject({
    resolve: { alias: [{ find: /^drizzle-orm(?=\/|$)/, replacement: 'drizzle-orm-1' }] },
    test: { name: 'drizzle-1', include: ['test/v1/**/*.test.ts'] },
  }),
)
