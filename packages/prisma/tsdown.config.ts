import { defineConfig } from 'tsdown'

export default defineConfig({
  entry: ['src/index.ts', 'src/generator.ts', 'src/generator-bin.ts'],
  format: ['esm'],
  dts: true,
  publint: true,
})
