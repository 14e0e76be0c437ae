import { defineConfig } from 'vitest/config'

/** Settings every project shares: tests run against `src/` through the source condition. */
export default defineConfig({
  resolve: { conditions: ['@shardflake/source'] },
  ssr: { resolve: { conditions: ['@shardflake/source'] } },
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    allowOnly: !process.env.CI,
  },
})
