/**
 * The example runs as users run it (`node src/...`, against the built packages): the benchmark
 * places every post on its author's shard and pays the round trips it promises (one per INSERT
 * without prefetch, fewer with it), and the quick start of the package README, which is
 * `src/quick-start.ts`, runs on a fresh database with the README's tables. Timings are printed,
 * never asserted.
 */
import { execFile } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { expectedShard, freshDatabase } from '@shardflake/conformance'
import { defineSharding, instagram } from '@shardflake/core'
import { expect, it } from 'vitest'

const run = promisify(execFile)
const root = join(import.meta.dirname, '..')
const readmePath = join(root, '..', '..', 'packages', 'drizzle', 'README.md')

interface Result {
  size: number
  mode: string
  rowsPerSecond: number
  ratio: number
  cpuMsPerInsert: number
  serverCpuMsPerInsert: number
  roundTripsPerInsert: number | null
}

it('runs the insert benchmark: posts on their author’s shard, one round trip per INSERT without prefetch, fewer with it', async () => {
  const { stdout } = await run(
    process.execPath,
    [
      join(root, 'src', 'bench.ts'),
      '--json',
      '--quick',
      '--sizes=1,10',
      '--prefetch=100',
      '--database=sf_drizzle_example_test',
      '--prefetch-max-age-ms=600000',
    ],
    { env: { ...process.env, NODE_OPTIONS: '' }, timeout: 120_000 },
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
    expect(of('identity', size).ratio).toBe(1)
    for (const mode of ['in-process', '$defaultFn']) {
      expect(of(mode, size).rowsPerSecond).toBeGreaterThan(0)
    }
    expect(of('db, no prefetch', size).roundTripsPerInsert).toBe(1)
    expect(of('database', size).roundTripsPerInsert).toBeLessThan(1) // 100 IDs per trip
  }
  // Client and server CPU per insert are measured for every mode (the server's from its
  // processes' schedstat: this suite's database runs on this machine).
  for (const result of results) {
    expect(result.cpuMsPerInsert).toBeGreaterThan(0)
    expect(result.serverCpuMsPerInsert).toBeGreaterThan(0)
  }
}, 180_000)

it("runs the quick start of the package README, which is this example's src/quick-start.ts", async () => {
  const code = await readFile(join(root, 'src', 'quick-start.ts'), 'utf8')
  const readme = await readFile(readmePath, 'utf8')
  expect(readme).toContain(`\`\`\`ts\n${code}\`\`\``)
  const tables = /```sql\n([\s\S]*?)```/.exec(readme)?.[1]
  expect(tables).toContain('CREATE TABLE comments')
  const raw = await freshDatabase('postgres', 'sf_drizzle_quick_start')
  try {
    await raw.query(tables!)
    const { stdout } = await run(process.execPath, [join(root, 'src', 'quick-start.ts')], {
      cwd: root,
      env: { ...process.env, NODE_OPTIONS: '', DATABASE_URL: raw.url },
      timeout: 60_000,
    })
    const shard = expectedShard('ada@example.com', 64)
    expect(JSON.parse(stdout.replaceAll(' ', ''))).toEqual([shard, shard, shard, shard])
    const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
    const stored = await raw.query(
      `SELECT id::text FROM users UNION ALL SELECT id::text FROM posts UNION ALL SELECT id::text FROM comments`,
    )
    expect(stored.map((row) => sharding.shardOfId(String(row.id)))).toEqual([
      shard,
      shard,
      shard,
      shard,
    ])
  } finally {
    await raw.close()
  }
}, 120_000)
