import { defineConfig } from 'tsdown'

export default defineConfig({
  entry: ['src/index.ts', 'src/legacy.ts', 'src/es.ts', 'src/migrations.ts', 'src/v6.ts'],
  format: ['esm', 'cjs'],
  dts: true,
  publint: true,
  attw: { profile: 'node16' },
})
