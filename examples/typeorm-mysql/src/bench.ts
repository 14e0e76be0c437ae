/**
 * Seed 001's experiment, redone on TypeORM: insert N posts one `save()` at a time (or in batches),
 * once into a table whose key comes from shardflake before the INSERT and once into an
 * AUTO_INCREMENT table of the same shape, and compare. Each table grows from empty to N rows in
 * `--rounds` alternating rounds (which table goes first alternates); throughput is the median of
 * the rounds, the ratio the median of the per-round ratios, latencies are per save() call.
 *
 *   node dist/bench.js                          # MariaDB/MySQL, MysqlSource (stored routines)
 *   node dist/bench.js --db postgres            # PostgreSQL, InProcessSource vs an identity column
 *   node dist/bench.js --counts 100,5000        # smaller runs
 *   node dist/bench.js --batch 1000 --json      # 1000 rows per save(), JSON out
 *   node dist/bench.js --save results.json      # the table, and the JSON into a file
 *   node dist/bench.js --batch 1000 --sort      # each batch ordered by shard (ascending IDs)
 *
 * MYSQL_URL / PG_URL point at the server (defaults: root@127.0.0.1:3306, postgres@127.0.0.1:5432);
 * the benchmark makes its own databases, named sf_typeorm_example*.
 */
import 'reflect-metadata'
import { writeFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { type IdSource, InProcessSource, instagram } from '@shardflake/core'
import { createMysqlPool, detectDialect, installMysqlShards, MysqlSource } from '@shardflake/mysql'
import { useShardedIds } from '@shardflake/typeorm'
import mysql, { type RowDataPacket } from 'mysql2/promise'
import pg from 'pg'
import { DataSource, type DataSourceOptions, type EntityTarget, type ObjectLiteral } from 'typeorm'
import { AutoPost, ShardedPost } from './entities.ts'

const { values: args } = parseArgs({
  options: {
    db: { type: 'string', default: 'mysql' },
    counts: { type: 'string', default: '100,100000' },
    rounds: { type: 'string', default: '5' },
    batch: { type: 'string', default: '1' },
    users: { type: 'string', default: '1000' },
    shards: { type: 'string', default: '16' },
    sort: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
    save: { type: 'string' },
  },
})

const db = args.db === 'postgres' ? 'postgres' : 'mysql'
const counts = args.counts.split(',').map(Number)
const rounds = Number(args.rounds)
const batch = Number(args.batch)
const logicalShards = Number(args.shards)
const users = Array.from({ length: Number(args.users) }, (_, i) => String(1801 + i * 7919))
const database = 'sf_typeorm_example'

interface Variant {
  name: string
  entity: EntityTarget<ObjectLiteral>
  table: string
}

interface Result {
  rows: number
  variant: string
  rowsPerSecond: number
  ratio: number | null
  p50Ms: number
  p99Ms: number
  tableBytes: number
  indexBytes: number
}

async function main() {
  const setup = db === 'mysql' ? await setupMysql() : await setupPostgres()
  const dataSource = new DataSource({
    ...setup.options,
    entities: [ShardedPost, AutoPost],
    synchronize: true,
    dropSchema: true,
  } as DataSourceOptions)
  useShardedIds(dataSource, { source: setup.source })
  await dataSource.initialize()
  const auto: Variant = { name: setup.autoName, entity: AutoPost, table: 'posts_auto' }
  const sharded: Variant = { name: setup.shardedName, entity: ShardedPost, table: 'posts_sharded' }

  const results: Result[] = []
  try {
    for (const variant of [auto, sharded]) await insert(dataSource, variant, 200, 0) // warm-up
    for (const rows of counts) {
      const speed = new Map<Variant, number[]>([
        [auto, []],
        [sharded, []],
      ])
      const latency = new Map<Variant, number[]>([
        [auto, []],
        [sharded, []],
      ])
      // Both tables start empty and grow to `rows`: each round adds its share, alternating which
      // table goes first, so both see the same table sizes and the same moments of the machine.
      for (const variant of [auto, sharded]) await dataSource.getRepository(variant.entity).clear()
      for (let round = 0; round < rounds; round++) {
        const share =
          Math.floor((rows * (round + 1)) / rounds) - Math.floor((rows * round) / rounds)
        for (const variant of round % 2 === 0 ? [auto, sharded] : [sharded, auto]) {
          const run = await insert(dataSource, variant, share, Math.floor((rows * round) / rounds))
          speed.get(variant)!.push(share / run.seconds)
          latency.get(variant)!.push(...run.latencies)
        }
      }
      const ratios = speed.get(sharded)!.map((value, i) => value / speed.get(auto)![i]!)
      for (const variant of [auto, sharded]) {
        const sizes = await tableSize(dataSource, variant.table)
        results.push({
          rows,
          variant: variant.name,
          rowsPerSecond: median(speed.get(variant)!),
          ratio: variant === sharded ? median(ratios) : null,
          p50Ms: percentile(latency.get(variant)!, 0.5),
          p99Ms: percentile(latency.get(variant)!, 0.99),
          ...sizes,
        })
      }
    }
  } finally {
    await dataSource.destroy()
    await setup.close()
  }
  const report = {
    db: setup.server,
    batch,
    sorted: args.sort,
    rounds,
    users: users.length,
    logicalShards,
    results,
  }
  if (args.save) writeFileSync(args.save, `${JSON.stringify(report, null, 2)}\n`)
  if (args.json) {
    console.log(JSON.stringify(report, null, 2))
  } else {
    print(setup.server, results)
  }
}

/** Appends `rows` posts (numbered from `first`), `batch` per save(); times every save(). */
async function insert(dataSource: DataSource, variant: Variant, rows: number, first: number) {
  const repository = dataSource.getRepository(variant.entity)
  const latencies: number[] = []
  const started = performance.now()
  for (let i = 0; i < rows; i += batch) {
    const posts = Array.from({ length: Math.min(batch, rows - i) }, (_, k) =>
      repository.create({
        userId: users[(first + i + k) % users.length],
        title: `post ${first + i + k}`,
      }),
    )
    // --sort: rows of one shard together, so a multi-row INSERT carries ascending IDs.
    if (args.sort) posts.sort((a, b) => shardOfUser(a.userId) - shardOfUser(b.userId))
    const before = performance.now()
    await repository.save(posts.length === 1 ? posts[0]! : posts)
    latencies.push(performance.now() - before)
  }
  return { seconds: (performance.now() - started) / 1000, latencies }
}

async function tableSize(dataSource: DataSource, table: string) {
  if (db === 'mysql') {
    await dataSource.query(`ANALYZE TABLE ${table}`)
    const [row] = await dataSource.query(
      'SELECT data_length AS t, index_length AS i FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = ?',
      [table],
    )
    return { tableBytes: Number(row.t), indexBytes: Number(row.i) }
  }
  await dataSource.query(`VACUUM ANALYZE ${table}`)
  const [row] = await dataSource.query('SELECT pg_table_size($1) AS t, pg_indexes_size($1) AS i', [
    table,
  ])
  return { tableBytes: Number(row.t), indexBytes: Number(row.i) }
}

async function setupMysql() {
  const url = new URL(process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test')
  const admin = await mysql.createConnection({ uri: url.toString() })
  await admin.query(`DROP DATABASE IF EXISTS ${database}`)
  await admin.query(`CREATE DATABASE ${database}`)
  await admin.end()
  url.pathname = `/${database}`
  const pool = await createMysqlPool({ uri: url.toString(), connectionLimit: 4 })
  const dialect = await detectDialect(pool)
  const shards = Array.from({ length: logicalShards }, (_, i) => i)
  const schemaPrefix = `${database}_s`
  await installMysqlShards(pool, { layout: instagram, shards, schemaPrefix, logicalShards })
  const source: IdSource = new MysqlSource({
    layout: instagram,
    pool,
    shards,
    schemaPrefix,
    logicalShards,
    endPools: true,
  })
  const [versions] = await pool.query<RowDataPacket[]>('SELECT VERSION() AS v')
  return {
    server: `${dialect === 'mariadb' ? 'MariaDB' : 'MySQL'} ${String(versions[0]?.v)}`,
    options: { type: dialect === 'mariadb' ? 'mariadb' : 'mysql', url: url.toString() } as const,
    source,
    autoName: 'AUTO_INCREMENT',
    shardedName: '@ShardedId (MysqlSource)',
    close: async () => {
      await source.close?.()
    },
  }
}

async function setupPostgres() {
  const url = new URL(process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test')
  const admin = new pg.Client({ connectionString: url.toString() })
  await admin.connect()
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
  await admin.query(`CREATE DATABASE ${database}`)
  const { rows } = await admin.query('SHOW server_version')
  await admin.end()
  url.pathname = `/${database}`
  const source = new InProcessSource({ layout: instagram, shards: 'all', logicalShards })
  return {
    server: `PostgreSQL ${rows[0].server_version}`,
    options: { type: 'postgres', url: url.toString() } as const,
    source,
    autoName: 'identity (bigserial)',
    shardedName: '@ShardedId (InProcessSource)',
    close: async () => {},
  }
}

function shardOfUser(userId: string): number {
  return Number(BigInt(userId) % BigInt(logicalShards))
}

function median(values: readonly number[]): number {
  return percentile(values, 0.5)
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  if (sorted.length === 0) return Number.NaN
  const index = (sorted.length - 1) * p
  const low = Math.floor(index)
  const high = Math.ceil(index)
  return sorted[low]! + (sorted[high]! - sorted[low]!) * (index - low)
}

function print(server: string, results: readonly Result[]) {
  const mode =
    batch === 1
      ? 'one row per save()'
      : `${batch} rows per save()${args.sort ? ', sorted by shard' : ''}`
  console.log(
    `${server} · TypeORM · ${mode} · ${rounds} alternating rounds (medians) · ${users.length} users on ${logicalShards} logical shards\n`,
  )
  const header = ['rows', 'key', 'rows/s', 'ratio', 'p50 ms', 'p99 ms', 'table KiB', 'index KiB']
  const lines = results.map((r) => [
    r.rows.toLocaleString('en-US'),
    r.variant,
    Math.round(r.rowsPerSecond).toLocaleString('en-US'),
    r.ratio === null ? '1.00' : r.ratio.toFixed(2),
    r.p50Ms.toFixed(2),
    r.p99Ms.toFixed(2),
    Math.round(r.tableBytes / 1024).toLocaleString('en-US'),
    Math.round(r.indexBytes / 1024).toLocaleString('en-US'),
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((line) => line[i]!.length)))
  const row = (cells: string[]) =>
    `| ${cells.map((cell, i) => (i < 2 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join(' | ')} |`
  console.log(row(header))
  console.log(
    `|${widths.map((w, i) => (i < 2 ? `${'-'.repeat(w + 2)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`,
  )
  for (const line of lines) console.log(row(line))
}

await main()
