/**
 * The example runs as users run it (`node src/bench.ts`, against the built packages): every row
 * it wrote decodes to the shard its rule gives, and the database sources make the round trips the
 * adapter promises (one per shard per call without prefetch, fewer with it). Timings are printed,
 * never asserted.
 */
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { expect, it } from 'vitest'

interface Result {
  workload: string
  mode: string
  rowsPerSecond: number
  ratio: number
  roundTripsPerCall: number | null
}

it('runs the benchmark: every row on its shard, one round trip per shard per call, fewer with prefetch', async () => {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [
      join(import.meta.dirname, '..', 'src', 'bench.ts'),
      '--json',
      '--quick',
      '--rounds=1',
      '--database=sf_sequelize_example_test',
      '--prefetch-max-age-ms=600000',
    ],
    { env: { ...process.env, NODE_OPTIONS: '' }, timeout: 240_000 },
  )
  const { results, placement } = JSON.parse(stdout) as {
    results: Result[]
    placement: { posts: number; comments: number; misplaced: number }
  }
  expect(placement.posts).toBeGreaterThan(0)
  expect(placement.comments).toBeGreaterThan(0)
  expect(placement.misplaced).toBe(0)
  const of = (workload: string, mode: string) =>
    results.find((result) => result.workload === workload && result.mode === mode)!
  for (const workload of ['single', 'nested', 'batch', 'spread', 'sorted']) {
    expect(of(workload, 'autoincrement').ratio).toBe(1)
    expect(of(workload, 'in-process').rowsPerSecond).toBeGreaterThan(0)
    expect(of(workload, 'in-process').roundTripsPerCall).toBeNull()
  }
  // Without prefetch: one next_ids() per shard per call, a nested create's four rows included.
  expect(of('single', 'db, no prefetch').roundTripsPerCall).toBe(1)
  expect(of('nested', 'db, no prefetch').roundTripsPerCall).toBe(1)
  expect(of('batch', 'db, no prefetch').roundTripsPerCall).toBe(1)
  expect(of('spread', 'db, no prefetch').roundTripsPerCall).toBe(64)
  expect(of('sorted', 'db, no prefetch').roundTripsPerCall).toBe(64)
  // With prefetch (100 IDs per shard and trip), single rows mostly come from the buffer.
  expect(of('single', 'database').roundTripsPerCall).toBeLessThan(1)
}, 300_000)
