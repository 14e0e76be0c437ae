import { defineConfig } from 'tsdown'

export default defineConfig({
  entry: ['src/index.ts', 'src/legacy.ts', 'src/es.ts', 'src/migrations.ts', 'src/v6.ts'],
  format: ['esm'],
  dts: true,
  publint: true,
})
