/**
 * What users install is `dist/`, through each package's `exports` map. This file loads every
 * published package the way Node does for users (no source condition), with `import` and, where
 * the package ships CommonJS, `require`, and runs publint on it, so the maps cannot rot.
 * `pnpm test` builds first.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { publint } from 'publint'
import { describe, expect, it } from 'vitest'

const packagesDir = join(import.meta.dirname, '..', 'packages')

interface Manifest {
  name: string
  private?: boolean
  exports?: Record<string, unknown>
}

const published = readdirSync(packagesDir)
  .map((folder) => ({
    dir: join(packagesDir, folder),
    file: join(packagesDir, folder, 'package.json'),
  }))
  .filter(({ file }) => existsSync(file))
  .map(({ dir, file }) => ({ dir, manifest: JSON.parse(readFileSync(file, 'utf8')) as Manifest }))
  .filter(({ manifest }) => !manifest.private)

/** Runs node in the package's folder, where it resolves itself by name through `exports`. */
function exportedNames(dir: string, name: string, mode: 'import' | 'require'): string[] {
  const script =
    mode === 'require'
      ? `console.log(JSON.stringify(Object.keys(require(${JSON.stringify(name)})).sort()))`
      : `console.log(JSON.stringify(Object.keys(await import(${JSON.stringify(name)})).sort()))`
  const args = mode === 'require' ? ['-e', script] : ['--input-type=module', '-e', script]
  const output = execFileSync(process.execPath, args, {
    cwd: dir,
    encoding: 'utf8',
    env: { ...process.env, NODE_OPTIONS: '' },
  })
  return JSON.parse(output) as string[]
}

describe('built packages', () => {
  it('finds the published packages', () => {
    expect(published.map(({ manifest }) => manifest.name)).toContain('@shardflake/core')
  })

  for (const { dir, manifest } of published) {
    describe(manifest.name, () => {
      const root = manifest.exports?.['.'] as Record<string, unknown> | undefined

      it('loads through import', () => {
        expect(exportedNames(dir, manifest.name, 'import').length).toBeGreaterThan(0)
      })

      if (root && 'require' in root) {
        it('loads through require, with the same exports as import', () => {
          expect(exportedNames(dir, manifest.name, 'require')).toEqual(
            exportedNames(dir, manifest.name, 'import'),
          )
        })
      }

      it('passes publint', async () => {
        const { messages } = await publint({ pkgDir: dir, level: 'warning', strict: true })
        expect(messages.map((message) => `${message.code} ${message.path.join('.')}`)).toEqual([])
      })
    })
  }
})
