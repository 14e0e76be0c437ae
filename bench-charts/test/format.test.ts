import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { type BenchResults, formatResults, main, renderSvg } from '../src/index.ts'

const biome = join(import.meta.dirname, '..', '..', 'node_modules', '.bin', 'biome')
const biomeFormat = (text: string) =>
  execFileSync(biome, ['format', '--stdin-file-path=results.json'], {
    input: text,
    encoding: 'utf8',
  })
/** Biome's check on SVGs (inside the repository, where Biome looks): its exit status and summary. */
async function biomeCheck(svgs: string[]) {
  const dir = await mkdtemp(join(import.meta.dirname, '.lint-'))
  try {
    const files = await Promise.all(
      svgs.map(async (svg, index) => {
        const file = join(dir, `chart-${index}.svg`)
        await writeFile(file, svg)
        return file
      }),
    )
    const run = spawnSync(biome, ['check', ...files], { encoding: 'utf8' })
    return { status: run.status, output: run.stdout + run.stderr }
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

/** Rows whose value arrays cross the line width at every point around 100 columns. */
function sample(seed: number): BenchResults {
  const rows = Array.from({ length: 12 }, (_, index) => {
    const count = 1 + ((seed * 7 + index * 5) % 23)
    const digits = 1 + ((seed + index) % 9)
    return {
      label: `row ${index}`,
      ...(index % 3 ? { group: `group ${index % 2}` } : {}),
      values: Array.from(
        { length: count },
        (_, round) => 10 ** (digits - 1) + round * 7 + (index % 4 === 0 ? 0.25 : 0),
      ),
    }
  })
  return {
    title: `Sample ${seed}`,
    unit: 'IDs/s',
    note: seed % 2 ? 'short' : ['a line of text under the title'.repeat(seed % 4), 'another'],
    rows,
  }
}

describe('what lands in the repository passes pnpm lint', () => {
  it('lays the JSON out exactly as the repository formatter does', () => {
    for (let seed = 1; seed <= 8; seed++) {
      const text = formatResults(sample(seed))
      expect(JSON.parse(text)).toEqual(sample(seed))
      expect(biomeFormat(text)).toBe(text)
    }
  })

  it('--tidy rewrites what JSON.stringify wrote, and leaves a tidy file alone', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'bench-charts-'))
    try {
      const input = join(dir, 'sample.chart.json')
      await writeFile(input, JSON.stringify(sample(3), null, 2))
      expect(await main([input, '--tidy'])).toBe(0)
      const tidy = await readFile(input, 'utf8')
      expect(tidy).toBe(formatResults(sample(3)))
      expect(await readFile(join(dir, 'sample.svg'), 'utf8')).toContain('>Sample 3<')
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('draws SVGs that pass the repository lint (a title, no ARIA roles on groups)', async () => {
    const grouped: BenchResults = {
      title: 'Grouped',
      unit: 'IDs/s',
      baseline: 'peer',
      rows: ['one', 'two'].flatMap((group) => [
        { group, label: 'peer', values: [10, 12, 9] },
        { group, label: 'ours', values: [9, 13, 8] },
      ]),
    }
    const svgs = await Promise.all([sample(1), grouped].map(renderSvg))
    expect(await biomeCheck(svgs)).toMatchObject({ status: 0, output: /Checked 2 files/ })
    // The check bites: what Vega writes by itself fails it.
    const raw = '<svg xmlns="http://www.w3.org/2000/svg"><g role="graphics-object"></g></svg>\n'
    expect((await biomeCheck([raw])).status).toBe(1)
  })
})
