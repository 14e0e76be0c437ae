/**
 * The example runs as users run it (`node src/bench.ts`, against the built packages): every post
 * lands on its author's shard, the database source makes one round trip per insert without
 * prefetch and fewer with it, and every mode returns its keys. Timings are printed, never asserted.
 */
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { expect, it } from 'vitest'

interface Result {
  size: number
  mode: string
  rowsPerSecond: number
  ratio: number
  cpuMsPerInsert: number
  serverCpuMsPerInsert: number
  roundTripsPerInsert: number | null
}

it('runs the insert benchmark: rows co-located, one round trip per insert without prefetch, fewer with it', async () => {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [
      join(import.meta.dirname, '..', 'src', 'bench.ts'),
      '--json',
      '--quick',
      '--sizes=1,10',
      '--database=sf_kysely_example_test',
      '--prefetch-max-age-ms=600000',
    ],
    { env: { ...process.env, NODE_OPTIONS: '' }, timeout: 150_000 },
  )
  const { results, coLocation } = JSON.parse(stdout) as {
    results: Result[]
    coLocation: { posts: number; misplaced: number }
  }
  expect(coLocation.posts).toBeGreaterThan(0)
  expect(coLocation.misplaced).toBe(0)
  const of = (mode: string, size: number) =>
    results.find((result) => result.mode === mode && result.size === size)!
  for (const size of [1, 10]) {
    expect(of('autoincrement', size).ratio).toBe(1)
    for (const mode of [
      'in-process',
      'in-process, plugin',
      'in-process, async',
      'ids given',
      'db ids given',
      'ids given, db table',
      'db ids given, in-proc table',
    ]) {
      expect(of(mode, size).rowsPerSecond).toBeGreaterThan(0)
      expect(of(mode, size).roundTripsPerInsert).toBeNull()
    }
    expect(of('db, no prefetch', size).roundTripsPerInsert).toBe(1)
    expect(of('database', size).roundTripsPerInsert).toBeLessThan(1) // 100 IDs per trip
    expect(of('db, no refill ahead', size).roundTripsPerInsert).toBeLessThan(1)
  }
  // Client and server CPU per insert are measured for every mode (the server's from its
  // processes' schedstat: this suite's database runs on this machine).
  for (const result of results) {
    expect(result.cpuMsPerInsert).toBeGreaterThan(0)
    expect(result.serverCpuMsPerInsert).toBeGreaterThan(0)
  }
}, 200_000)
