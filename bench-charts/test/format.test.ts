import { execFileSync } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { type BenchResults, formatResults, main } from '../src/index.ts'

const biome = join(import.meta.dirname, '..', '..', 'node_modules', '.bin', 'biome')
const biomeFormat = (text: string) =>
  execFileSync(biome, ['format', '--stdin-file-path=results.json'], {
    input: text,
    encoding: 'utf8',
  })

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

describe('formatResults', () => {
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
})
