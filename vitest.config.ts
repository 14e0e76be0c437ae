import { defineConfig } from 'vitest/config'

/**
 * One vitest run for the whole workspace. Every package, `test/`, `readme-check/` (its static
 * checks; the quick-start runner is `pnpm test:readmes`) and every example is a project; each
 * may add a `vitest.config.ts` of its own (merged over `vitest.shared.ts`), and a package may add
 * more projects as `vitest.<name>.config.ts` (Drizzle 1.0 beside 0.45).
 */
export default defineConfig({
  test: {
    projects: [
      'packages/*/vitest.config.ts',
      'packages/*/vitest.*.config.ts',
      'test/vitest.config.ts',
      'readme-check/vitest.config.ts',
      'examples/*/vitest.config.ts',
      'bench-charts/vitest.config.ts',
    ],
  },
})
