/**
 * The benchmark, run small on both servers: every table ends with the rows it was given, and on
 * the sharded tables every key is distinct and on its author's shard, checked through raw SQL.
 */
import { instagram } from '@shardflake/core'
import mysql, { type RowDataPacket } from 'mysql2/promise'
import pg from 'pg'
import { describe, expect, it } from 'vitest'
import { type BenchmarkConfig, runBenchmark } from '../src/benchmark.ts'

const logicalShards = 16

async function rowsOf(db: BenchmarkConfig['db'], database: string, table: string) {
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
      const [rows] = await connection.query<RowDataPacket[]>(
        `SELECT CAST(id AS CHAR) AS id, CAST(user_id AS CHAR) AS user_id FROM ${table}`,
      )
      return rows.map((row) => ({ id: String(row.id), userId: String(row.user_id) }))
    } finally {
      await connection.end()
    }
  }
  const url = new URL(process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test')
  url.pathname = `/${database}`
  const client = new pg.Client({ connectionString: url.toString() })
  await client.connect()
  try {
    const { rows } = await client.query(
      `SELECT id::text AS id, user_id::text AS user_id FROM ${table}`,
    )
    return rows.map((row) => ({ id: String(row.id), userId: String(row.user_id) }))
  } finally {
    await client.end()
  }
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
    const database = `sf_typeorm_example_test_${db === 'mysql' ? 'my' : 'pg'}`
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
        expect(instagram.shardOf(row.id)).toBe(Number(BigInt(row.userId) % BigInt(logicalShards)))
      }
    }
  })
})
