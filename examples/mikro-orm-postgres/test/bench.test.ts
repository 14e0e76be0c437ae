/**
 * The example runs as users run it (`node src/bench.ts`, against the built packages), and the
 * round trips it reports are the ones the adapter promises: one per shard per flush from onFlush,
 * fewer with the source's prefetch, one per entity from a beforeCreate hook. Timings are printed, never asserted.
 */
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { expect, it } from 'vitest'

interface Result {
  size: number
  mode: string
  entitiesPerSecond: number
  ratio: number
  roundTripsPerFlush: number | null
}

it('runs the unit-of-work benchmark: rows co-located, one round trip per flush from onFlush, fewer with prefetch', async () => {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [
      join(import.meta.dirname, '..', 'src', 'bench.ts'),
      '--json',
      '--quick',
      '--sizes=1,10',
      '--database=sf_mikro_example_test',
      '--prefetch-max-age-ms=600000',
    ],
    { env: { ...process.env, NODE_OPTIONS: '' }, timeout: 120_000 },
  )
  const { results, coLocation } = JSON.parse(stdout) as {
    results: Result[]
    coLocation: { posts: number; comments: number; misplaced: number }
  }
  // Every post on its author's shard and every comment on its post's, decoded from both IDs.
  expect(coLocation.posts).toBeGreaterThan(0)
  expect(coLocation.comments).toBeGreaterThan(0)
  expect(coLocation.misplaced).toBe(0)
  const of = (mode: string, size: number) =>
    results.find((result) => result.mode === mode && result.size === size)!
  for (const size of [1, 10]) {
    expect(of('autoincrement', size).ratio).toBe(1)
    expect(of('in-process', size).entitiesPerSecond).toBeGreaterThan(0)
    expect(of('db, no prefetch', size).roundTripsPerFlush).toBe(1)
    expect(of('beforeCreate', size).roundTripsPerFlush).toBe(size)
    expect(of('database', size).roundTripsPerFlush).toBeLessThan(1) // prefetch: 100 IDs per trip
  }
}, 180_000)
