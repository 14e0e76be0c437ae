/**
 * The example runs as users run it (`prisma generate`, then `node src/main.ts` against the built
 * packages, its own three servers per dialect) and must exit 0 with every check passed; then, in
 * this process, the checks must catch a router that puts rows on the wrong servers.
 */
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { ShardMap } from '@shardflake/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { OrmReport } from '../src/app.ts'
import { runOrm } from '../src/app.ts'
import { ORMS } from '../src/blog.ts'
import type { MoveDemoReport } from '../src/move-demo.ts'
import { type ExampleServers, sharding, startExampleServers } from '../src/servers.ts'

const run = promisify(execFile)
const root = join(import.meta.dirname, '..')

beforeAll(async () => {
  await run('pnpm', ['generate'], {
    cwd: root,
    env: { ...process.env, CHECKPOINT_DISABLE: '1' },
  })
}, 180_000)

/** `node src/main.ts --json`, as the README's command runs it. */
async function runExample(args: string[]): Promise<{ code: number; reports: OrmReport[] }> {
  const command = [
    '--experimental-transform-types',
    '--no-warnings',
    '--import',
    './src/hooks.ts',
    'src/main.ts',
    '--json',
    ...args,
  ]
  try {
    const { stdout } = await run(process.execPath, command, {
      cwd: root,
      maxBuffer: 64 * 1024 * 1024,
    })
    return { code: 0, reports: JSON.parse(stdout) as OrmReport[] }
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string }
    if (typeof failed.code !== 'number') throw error
    let reports: OrmReport[] = []
    try {
      reports = JSON.parse(failed.stdout ?? '[]') as OrmReport[]
    } catch {
      throw new Error(`The example failed: ${failed.stderr}`)
    }
    return { code: failed.code, reports }
  }
}

function expectAtHome(report: OrmReport) {
  expect(report.problems).toEqual([])
  expect(report.misplaced).toEqual([])
  expect(report.offParent).toBe(0)
  // 30 users, 90 posts, 180 comments, on all three servers
  for (const [table, total] of [
    ['users', 30],
    ['posts', 90],
    ['comments', 180],
  ] as const) {
    const counts = report.rows[table]!
    expect(Object.values(counts).reduce((sum, n) => sum + n, 0)).toBe(total)
    expect(Object.keys(counts).sort()).toEqual(['a', 'b', 'c'])
    for (const n of Object.values(counts)) expect(n).toBeGreaterThan(0)
    // one INSERT per server for the one write call
    expect(report.inserts[table]).toEqual({ a: 1, b: 1, c: 1 })
  }
  expect(report.readsById.oneServer).toBe(report.readsById.reads)
  expect(report.readsById.reads).toBeGreaterThan(0)
  expect(report.readsByKey.oneServer).toBe(report.readsByKey.reads)
  expect(report.feed.matches).toBe(true)
  expect(report.feed.ids).toHaveLength(10)
}

describe.each([
  ['postgres', 'postgres'],
  ['mariadb', 'mariadb'],
])('node src/main.ts --dialect=%s', (_name, dialect) => {
  it('writes through every ORM, every row at home, exit 0', async () => {
    const { code, reports } = await runExample([`--dialect=${dialect}`])
    expect(reports.map((report) => report.orm)).toEqual([...ORMS])
    for (const report of reports) {
      expect(report.dialect).toBe(dialect)
      expectAtHome(report)
    }
    expect(code).toBe(0)
  }, 900_000)
})

/** `node src/move-demo.ts --json`, as the README's command runs it. */
async function runMoveDemo(args: string[]): Promise<MoveDemoReport> {
  const { stdout } = await run(
    process.execPath,
    [
      '--experimental-transform-types',
      '--no-warnings',
      '--import',
      './src/hooks.ts',
      'src/move-demo.ts',
      '--json',
      ...args,
    ],
    { cwd: root, maxBuffer: 64 * 1024 * 1024 },
  )
  return JSON.parse(stdout) as MoveDemoReport
}

describe.each([
  ['postgres', 'typeorm'],
  ['mariadb', 'prisma'],
  ['postgres', 'mikro-orm'],
])('node src/move-demo.ts --dialect=%s --orm=%s', (dialect, orm) => {
  it('moves shards 0-15 from a to c under writes and reads: nothing lost, misplaced or repeated', async () => {
    const report = await runMoveDemo([`--dialect=${dialect}`, `--orm=${orm}`])
    expect(report.acknowledgedOnMovedShards).toBeGreaterThan(0)
    expect(report.lost).toBe(0)
    expect(report.misplaced).toBe(0)
    expect(report.repeated).toBe(0)
    expect(report.reads).toBeGreaterThan(0)
    // the rows of shards 0-15 were copied to c and the old copies on a deleted
    const posts = report.move.tables.find((table) => table.table === 'posts')!
    expect(posts.rows).toBeGreaterThan(0)
    expect(report.move.oldCopiesDeleted).toBeGreaterThan(0)
  }, 900_000)
})

describe('the checks', () => {
  let servers: ExampleServers
  beforeAll(async () => {
    servers = await startExampleServers('postgres')
  }, 180_000)
  afterAll(async () => {
    await servers?.close()
  })

  it('catch rows written by a router whose map is not the servers', async () => {
    // The ORM is routed by another map (shards 0-20 on b instead of a): its rows of those
    // shards land on b, which the example's map does not give them.
    const wrong = new ShardMap(sharding, [
      { from: 0, to: 41, target: 'b' },
      { from: 42, to: 63, target: 'c' },
    ])
    const report = await runOrm(servers, 'typeorm', { directory: wrong })
    expect(report.misplaced.length).toBeGreaterThan(0)
    expect(report.misplaced.every((row) => row.server === 'b' && row.home === 'a')).toBe(true)
    expect(report.rows.users!.a).toBe(0)
    expect(report.problems).toContain(
      `${report.misplaced.length} rows are not on their shard's server`,
    )
    // reads go to b, where the router put the rows, not to their home a
    expect(report.readsById.oneServer).toBeLessThan(report.readsById.reads)
  }, 300_000)
})
