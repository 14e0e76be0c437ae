import { defineConfig } from 'vitest/config'

const PROJECTS: Record<string, string> = {
  core: 'packages/core/vitest.config.ts',
  typeorm: 'packages/typeorm/vitest.config.ts',
  prisma: 'packages/prisma/vitest.config.ts',
  'mikro-orm': 'packages/mikro-orm/vitest.config.ts',
}

/**
 * The projects `pnpm mutate` runs: core and the ORM adapters whose code decides which shard a row
 * gets. Stryker asks vitest for the tests related to each mutated file and, with per-test
 * coverage, runs only the tests that reach each mutant. `MUTATE_PROJECTS=core` limits the run to
 * some projects (a comma-separated list), for a faster pass over core's files with core's tests.
 */
const chosen = (process.env.MUTATE_PROJECTS ?? Object.keys(PROJECTS).join(','))
  .split(',')
  .map((name) => name.trim())
  .filter(Boolean)
for (const name of chosen) {
  if (!PROJECTS[name]) {
    throw new Error(
      `MUTATE_PROJECTS names ${JSON.stringify(name)}; use some of ${Object.keys(PROJECTS).join(', ')}.`,
    )
  }
}

export default defineConfig({
  test: { projects: chosen.map((name) => PROJECTS[name]!) },
})
