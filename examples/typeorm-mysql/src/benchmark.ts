/**
 * The benchmark itself, as a function: {@link runBenchmark}. `bench.ts` is its command line; the
 * example's test runs it small and checks the tables through SQL.
 */
import 'reflect-metadata'
import { loadavg } from 'node:os'
import type { IdSource } from '@shardflake/core'
import { shardedIds } from '@shardflake/typeorm'
import { DataSource, type DataSourceOptions, type EntityTarget, type ObjectLiteral } from 'typeorm'
import { setupMysql, setupPostgres } from './setup.ts'

interface Variant {
  name: string
  entity: EntityTarget<ObjectLiteral>
  table: string
  /** The DataSource it is written through (each source needs its own subscriber). */
  dataSource: DataSource
}

export interface Keyed {
  name: string
  entity: EntityTarget<ObjectLiteral>
  table: string
  /** Where @ShardedId takes its IDs from; none for the database-generated baseline. */
  source?: IdSource
}

/** What one run measures. */
export interface BenchmarkConfig {
  /** `mysql`: MysqlSource (with and without prefetch) vs AUTO_INCREMENT; `postgres`: in-process vs identity. */
  db: 'mysql' | 'postgres'
  /** Row counts; each table grows from empty to each of them. @default [100, 100000] */
  counts: number[]
  /** Alternating rounds per count. @default 5 */
  rounds: number
  /** Rows per save(). @default 1 */
  batch: number
  /** Distinct authors. @default 1000 */
  users: number
  /** Logical shards the authors are spread over. @default 16 */
  logicalShards: number
  /** Order each batch by shard. @default false */
  sort: boolean
  /** MySQL: IDs per round trip of the prefetch variant (0: no such variant). @default 100 */
  prefetch: number
  /** MySQL: the prefetch buffer's `maxAgeMs`. @default 1000 */
  maxAgeMs: number
  /**
   * MySQL: add a table keyed by the in-process source, to tell what the source's round trips
   * cost from what keys the database does not generate cost. @default false
   */
  inProcess: boolean
  /** The database it creates, dropping an old one first (and `${database}_s<n>`, the shards, on MySQL). @default 'sf_typeorm_example' */
  database: string
}

export const defaults: BenchmarkConfig = {
  db: 'mysql',
  counts: [100, 100_000],
  rounds: 5,
  batch: 1,
  users: 1000,
  logicalShards: 16,
  sort: false,
  prefetch: 100,
  maxAgeMs: 1000,
  inProcess: false,
  database: 'sf_typeorm_example',
}

/** One table's figures at one row count. */
export interface Result {
  rows: number
  variant: string
  rowsPerSecond: number
  /** Rows/s of every round, in run order (the chart divides them by the baseline's round by round). */
  roundsPerSecond: number[]
  /** The smallest and largest per-round ratio to the baseline (null for the baseline). */
  ratioRange: [number, number] | null
  ratio: number | null
  p50Ms: number
  p99Ms: number
  tableBytes: number
  indexBytes: number
}

/** What {@link runBenchmark} returns (and `--json` prints). */
export interface Report {
  db: string
  batch: number
  sorted: boolean
  rounds: number
  users: number
  logicalShards: number
  prefetch: { size: number; maxAgeMs: number } | null
  /** `os.loadavg()` (1, 5, 15 min) at the start and after each row count. */
  loadAverage: number[][]
  results: Result[]
}

export async function runBenchmark(options: Partial<BenchmarkConfig> = {}): Promise<Report> {
  const config: BenchmarkConfig = { ...defaults, ...options }
  const { db, counts, rounds } = config
  const setup = db === 'mysql' ? await setupMysql(config) : await setupPostgres(config)
  const load = [loadavg()]
  // One DataSource per source (each source needs its own subscriber); the first also holds the
  // baseline and resets the schema.
  const [baseline, ...keyed] = setup.variants
  const variants: Variant[] = []
  for (const [i, variant] of keyed.entries()) {
    const dataSource = new DataSource({
      ...setup.options,
      entities: i === 0 ? [baseline!.entity, variant.entity] : [variant.entity],
      synchronize: true,
      dropSchema: i === 0,
    } as DataSourceOptions)
    shardedIds(dataSource, { source: variant.source! })
    await dataSource.initialize()
    if (i === 0) variants.push({ ...baseline!, dataSource })
    variants.push({ ...variant, dataSource })
  }
  const auto = variants[0]!
  const dataSources = [...new Set(variants.map((variant) => variant.dataSource))]

  const results: Result[] = []
  try {
    for (const variant of variants) await insert(config, variant, 200, 0) // warm-up
    for (const rows of counts) {
      const speed = new Map<Variant, number[]>(variants.map((variant) => [variant, []]))
      const latency = new Map<Variant, number[]>(variants.map((variant) => [variant, []]))
      // Every table starts empty and grows to `rows`: each round adds its share, rotating which
      // table goes first, so all see the same table sizes and the same moments of the machine.
      for (const variant of variants) {
        await variant.dataSource.getRepository(variant.entity).clear()
      }
      for (let round = 0; round < rounds; round++) {
        const share =
          Math.floor((rows * (round + 1)) / rounds) - Math.floor((rows * round) / rounds)
        const order = variants.map((_, i) => variants[(i + round) % variants.length]!)
        for (const variant of order) {
          const run = await insert(config, variant, share, Math.floor((rows * round) / rounds))
          speed.get(variant)!.push(share / run.seconds)
          latency.get(variant)!.push(...run.latencies)
        }
      }
      for (const variant of variants) {
        const ratios = speed.get(variant)!.map((value, i) => value / speed.get(auto)![i]!)
        const sizes = await tableSize(db, variant.dataSource, variant.table)
        results.push({
          rows,
          variant: variant.name,
          rowsPerSecond: median(speed.get(variant)!),
          roundsPerSecond: speed.get(variant)!,
          ratioRange: variant === auto ? null : [Math.min(...ratios), Math.max(...ratios)],
          ratio: variant === auto ? null : median(ratios),
          p50Ms: percentile(latency.get(variant)!, 0.5),
          p99Ms: percentile(latency.get(variant)!, 0.99),
          ...sizes,
        })
      }
      load.push(loadavg())
    }
  } finally {
    for (const dataSource of dataSources) await dataSource.destroy()
    await setup.close()
  }
  return {
    db: setup.server,
    batch: config.batch,
    sorted: config.sort,
    rounds,
    users: config.users,
    logicalShards: config.logicalShards,
    prefetch:
      db === 'mysql' && config.prefetch > 0
        ? { size: config.prefetch, maxAgeMs: config.maxAgeMs }
        : null,
    loadAverage: load.map((values) => values.map((value) => Number(value.toFixed(2)))),
    results,
  }
}

/** Appends `rows` posts (numbered from `first`), `batch` per save(); times every save(). */
async function insert(config: BenchmarkConfig, variant: Variant, rows: number, first: number) {
  const { batch, logicalShards } = config
  const users = userIds(config.users)
  const repository = variant.dataSource.getRepository(variant.entity)
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
    if (config.sort) {
      posts.sort(
        (a, b) => shardOfUser(a.userId, logicalShards) - shardOfUser(b.userId, logicalShards),
      )
    }
    const before = performance.now()
    await repository.save(posts.length === 1 ? posts[0]! : posts)
    latencies.push(performance.now() - before)
  }
  return { seconds: (performance.now() - started) / 1000, latencies }
}

async function tableSize(db: BenchmarkConfig['db'], dataSource: DataSource, table: string) {
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

export function shardOfUser(userId: string, logicalShards: number): number {
  return Number(BigInt(userId) % BigInt(logicalShards))
}

/** The authors posts are spread over: `count` distinct user IDs. */
export function userIds(count: number): string[] {
  return Array.from({ length: count }, (_, i) => String(1801 + i * 7919))
}

function median(values: readonly number[]): number {
  return percentile(values, 0.5)
}

export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  if (sorted.length === 0) return Number.NaN
  const index = (sorted.length - 1) * p
  const low = Math.floor(index)
  const high = Math.ceil(index)
  return sorted[low]! + (sorted[high]! - sorted[low]!) * (index - low)
}
