/** The demo the README's quick start runs must run, against the built packages, as users see it. */
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

describe('quick-start demo', () => {
  it('runs on PGlite and shows IDs that decode to their shards', () => {
    const output = execFileSync(
      process.execPath,
      [join(import.meta.dirname, '..', 'src', 'demo.ts')],
      {
        encoding: 'utf8',
        env: { ...process.env, NODE_OPTIONS: '' },
      },
    )
    expect(output).toMatch(/5,000 IDs for shard 1341 in one call: 5000 distinct, ascending: true/)
    expect(output).toMatch(/Decoded in SQL: shard_1341.comments holds 2 rows of shard 1341\./)
    // Three posts from the DEFAULT and six comments from the source, each on its user's shard.
    const rows = [...output.matchAll(/^ {2}(post|comment) +(\d+) +shard +(\d+)/gm)]
    expect(rows.map((row) => row[1])).toEqual([
      ...Array(3).fill('post'),
      ...Array(6).fill('comment'),
    ])
    expect(rows.map((row) => Number(row[3]))).toEqual([1341, 42, 3, 1341, 1341, 42, 42, 3, 3])
    expect(new Set(rows.map((row) => row[2])).size).toBe(9)
    expect(output).toMatch(/In-process, shard 7: 5000 distinct IDs/)
  })
})
