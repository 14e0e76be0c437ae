/** The demo the README's quick start runs must run, against the built packages, as users see it. */
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'

describe('quick-start demo', () => {
  it('runs and shows IDs that decode to their shards', () => {
    const output = execFileSync(
      process.execPath,
      [join(import.meta.dirname, '..', 'src', 'demo.ts')],
      {
        encoding: 'utf8',
        env: { ...process.env, NODE_OPTIONS: '' },
      },
    )
    expect(output).toMatch(/5,000 IDs for shard 1341 in one call: 5000 distinct, ascending: true/)
    expect(output.match(/shard 1341/g)?.length).toBeGreaterThanOrEqual(2)
  })
})
