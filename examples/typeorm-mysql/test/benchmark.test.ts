/**
 * The benchmark and the threads, run small on both servers, checked through raw SQL: every
 * table ends with the rows it was given; on the sharded tables every key is distinct and on its
 * author's shard; every comment's ID decodes to the shard its post's ID decodes to.
 */
import { randomBytes } from 'node:crypto'
import mysql, { type RowDataPacket } from 'mysql2/promise'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { type BenchmarkConfig, runBenchmark } from '../src/benchmark.ts'
import { shardingOf } from '../src/setup.ts'
import { writeThreads } from '../src/threads.ts'

const logicalShards = 16
const sharding = shardingOf({ logicalShards })
/** Per run, so two runs on one server never meet. */
const tag = `${process.pid}_${randomBytes(3).toString('hex')}`

async function query(db: BenchmarkConfig['db'], database: string, sql: string) {
  if (db === 'mysql') {
    const connection = await mysql.createConnection({
      uri: `${process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test'}`.replace(
        /\/[^/]*$/,
        `/${database}`,
      ),
      supportBigNumbers: true,
      bigNumberStrings: true,
    })
    try {
      const [rows] = await connection.query<RowDataPacket[]>(sql)
      return rows as Record<string, unknown>[]
    } finally {
      await connection.end()
    }
  }
  const url = new URL(process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test')
  url.pathname = `/${database}`
  const client = new pg.Client({ connectionString: url.toString() })
  await client.connect()
  try {
    return (await client.query(sql)).rows as Record<string, unknown>[]
  } finally {
    await client.end()
  }
}

async function rowsOf(db: BenchmarkConfig['db'], database: string, table: string) {
  const rows = await query(db, database, `SELECT id, user_id FROM ${table}`)
  return rows.map((row) => ({ id: String(row.id), userId: String(row.user_id) }))
}

describe.each([
  {
    db: 'mysql' as const,
    batch: 1,
    sort: false,
    tables: ['posts_auto', 'posts_sharded', 'posts_sharded_prefetch'],
  },
  { db: 'postgres' as const, batch: 7, sort: true, tables: ['posts_auto', 'posts_sharded'] },
])('the benchmark on $db, $batch rows per save()', ({ db, batch, sort, tables }) => {
  it('writes every row, keys on the author’s shard, and reports every table against the baseline', async () => {
    const database = `sf_typeorm_example_${db === 'mysql' ? 'my' : 'pg'}_${tag}`
    const report = await runBenchmark({
      db,
      counts: [60],
      rounds: 3,
      batch,
      sort,
      users: 10,
      logicalShards,
      prefetch: 10,
      database,
    })
    expect(report.results.map((result) => result.rows)).toEqual(tables.map(() => 60))
    expect(report.results.map((result) => result.ratio === null)).toEqual(
      tables.map((_, i) => i === 0),
    )
    expect(report.prefetch).toEqual(db === 'mysql' ? { size: 10, maxAgeMs: 1000 } : null)
    expect(report.loadAverage).toHaveLength(2)
    for (const result of report.results) {
      expect(result.rowsPerSecond).toBeGreaterThan(0)
      expect(result.p99Ms).toBeGreaterThanOrEqual(result.p50Ms)
      expect(result.tableBytes).toBeGreaterThan(0)
    }
    for (const table of tables) {
      const rows = await rowsOf(db, database, table)
      expect(rows).toHaveLength(60)
      expect(new Set(rows.map((row) => row.id)).size).toBe(60)
      if (table === 'posts_auto') continue
      for (const row of rows) {
        expect(sharding.shardOfId(row.id)).toBe(sharding.shardForKey(row.userId))
      }
    }
  })
})

describe.each(['mysql', 'postgres'] as const)('threads on %s', (db) => {
  it('puts every comment on its post’s shard: both IDs decode to the shard of the author', async () => {
    const database = `sf_typeorm_threads_${db === 'mysql' ? 'my' : 'pg'}_${tag}`
    await writeThreads({ db, database, users: 10, logicalShards }, 12)
    const rows = await query(
      db,
      database,
      'SELECT c.id, c.post_id, c.body, p.user_id FROM comments_sharded c JOIN posts_sharded p ON p.id = c.post_id',
    )
    expect(rows).toHaveLength(12 * 4)
    const shards = new Set<number>()
    for (const row of rows) {
      const shard = sharding.shardOfId(String(row.id))
      expect(shard).toBe(sharding.shardOfId(String(row.post_id)))
      expect(shard).toBe(sharding.shardForKey(String(row.user_id)))
      shards.add(shard)
    }
    expect(shards.size).toBeGreaterThan(1)
  })
})
