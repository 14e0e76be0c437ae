/**
 * Every README quick start, run verbatim: the packages are packed (`pnpm pack`, from the built
 * `dist/`), each variant of each quick start gets an empty app in a temporary folder outside the
 * repository and fresh servers or databases, its blocks are saved and its commands run in README
 * order (install lines install the tarballs and, from the npm registry, whatever else they name),
 * and the rows it wrote are checked through raw SQL.
 *
 * `pnpm test:readmes` (after `pnpm build`); `-t typeorm` runs one README; `READMES_KEEP=1`
 * keeps the apps for a look.
 */
import { readFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { quickStartSteps } from '../src/blocks.ts'
import { MUTANTS } from '../src/mutants.ts'
import { QUICK_STARTS } from '../src/quick-starts.ts'
import { packPackages, repositoryRoot } from '../src/scratch-app.ts'

let tarballs: Map<string, string>
let packed: string

beforeAll(async () => {
  packed = await mkdtemp(join(tmpdir(), 'readme-tarballs-'))
  tarballs = await packPackages(packed)
})

afterAll(async () => {
  if (packed) await rm(packed, { recursive: true, force: true })
})

for (const quickStart of QUICK_STARTS) {
  describe(quickStart.readme, () => {
    for (const [name, variant] of Object.entries(quickStart.variants)) {
      it(`runs the quick start verbatim (${name})`, async () => {
        const steps = quickStartSteps(readFileSync(join(repositoryRoot, quickStart.readme), 'utf8'))
        await variant.run(quickStart.readme, steps, name, tarballs)
      })
    }
  })
}

/**
 * The runner must fail when a README is wrong: each mutant breaks one block the way a README
 * rots (a forgotten step, a wrong rule, a missing install), and its run must fail with the
 * expected complaint.
 */
describe('a broken README fails', () => {
  for (const mutant of MUTANTS) {
    it(mutant.name, async () => {
      const quickStart = QUICK_STARTS.find((q) => q.readme === mutant.readme)!
      const text = readFileSync(join(repositoryRoot, mutant.readme), 'utf8')
      expect(text).toContain(mutant.replace)
      const steps = quickStartSteps(text.replace(mutant.replace, mutant.with))
      const variant = quickStart.variants[mutant.variant ?? 'default']!
      await expect(
        variant.run(mutant.readme, steps, mutant.variant ?? 'default', tarballs),
      ).rejects.toThrow(mutant.fails)
    })
  }
})
