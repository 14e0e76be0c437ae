import { defineConfig } from 'tsdown'

export default defineConfig([
  {
    // the library: ESM and CommonJS, like the other packages
    entry: ['src/index.ts', 'src/generator.ts'],
    format: ['esm', 'cjs'],
    dts: true,
    publint: true,
    attw: { profile: 'node16' },
  },
  {
    // the generator's process entry (run by `prisma generate` through bin/): ESM only
    entry: ['src/generator-bin.ts'],
    format: ['esm'],
    dts: false,
    clean: false,
  },
])
