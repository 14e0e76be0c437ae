import { defineConfig } from 'tsdown'

// Kysely 0.29 is ESM-only, and so is this package (Node >= 22.12 also loads it with require()).
export default defineConfig({
  entry: ['src/index.ts'],
  format: ['esm'],
  dts: true,
  publint: true,
  attw: { profile: 'esm-only', level: 'error' },
})
