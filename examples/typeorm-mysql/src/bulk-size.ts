/**
 * How compact a primary key grows under bulk `save()`s: `--batches` saves of `--rows` posts spread
 * over `--shards` logical shards, into an AUTO_INCREMENT / identity table and into sharded tables,
 * then the primary key's size. Sizes are deterministic for a given row order and ID order, so this
 * is fine on a busy machine (timings are not measured).
 *
 * Sharded tables, each with its own in-process source (warmed `--warm-ms` before the first save):
 * - `per shard`: IDs handed out per shard (`allocateIds`), rows of shards 9, 3, 12 interleave;
 * - `ascending`: the adapter's default, `allocateAscending` (IDs ascend in row order while the
 *   source's window allows, per shard otherwise); with `--pause-ms` between saves.
 *
 *   node dist/bulk-size.js                       # MariaDB
 *   node dist/bulk-size.js --db postgres         # PostgreSQL
 *   node dist/bulk-size.js --pause-ms 600 --json
 *
 * MariaDB: leaf pages of the clustered index (`mysql.innodb_index_stats`, after ANALYZE TABLE) and
 * `data_length`; PostgreSQL: `pg_relation_size` of the primary key's index.
 */
import { parseArgs } from 'node:util'
import {
  defineSharding,
  type IdRequestContext,
  InProcessSource,
  instagram,
  type SyncIdSource,
} from '@shardflake/core'
import { ShardedId, shardedIds } from '@shardflake/typeorm'
import mysql from 'mysql2/promise'
import pg from 'pg'
import 'reflect-metadata'
import { Column, DataSource, Entity, PrimaryGeneratedColumn } from 'typeorm'

@Entity('bulk_auto')
class BulkAuto {
  @PrimaryGeneratedColumn({ type: 'bigint' })
  id?: string
  @Column({ type: 'bigint', name: 'user_id' })
  userId!: string
  @Column({ type: 'varchar', length: 200 })
  title!: string
}

@Entity('bulk_per_shard')
class BulkPerShard {
  @ShardedId<BulkPerShard>({ shardBy: 'userId' })
  id?: string
  @Column({ type: 'bigint', name: 'user_id' })
  userId!: string
  @Column({ type: 'varchar', length: 200 })
  title!: string
}

@Entity('bulk_ascending')
class BulkAscending {
  @ShardedId<BulkAscending>({ shardBy: 'userId' })
  id?: string
  @Column({ type: 'bigint', name: 'user_id' })
  userId!: string
  @Column({ type: 'varchar', length: 200 })
  title!: string
}

const { values: args } = parseArgs({
  options: {
    db: { type: 'string', default: 'mysql' },
    batches: { type: 'string', default: '40' },
    rows: { type: 'string', default: '1000' },
    shards: { type: 'string', default: '16' },
    'pause-ms': { type: 'string', default: '0' },
    'warm-ms': { type: 'string', default: '1100' },
    database: { type: 'string', default: 'sf_h23_bulk' },
    json: { type: 'boolean', default: false },
    /** Which tables: `all`, or `ascending` alone (its saves then come back to back). */
    tables: { type: 'string', default: 'all' },
  },
})
const db = args.db === 'postgres' ? 'postgres' : 'mysql'
const batches = Number(args.batches)
const rows = Number(args.rows)
const logicalShards = Number(args.shards)
const pauseMs = Number(args['pause-ms'])
const sharding = defineSharding({ layout: instagram, logicalShards })

/** The in-process source seen as a plain synchronous source: it cannot order a batch. */
function perShardOnly(inner: InProcessSource): SyncIdSource {
  return {
    sharding: inner.sharding,
    synchronous: true,
    nextId: (shard: number, context?: IdRequestContext) => inner.nextId(shard, context),
    nextIds: (shard: number, count: number, context?: IdRequestContext) =>
      inner.nextIds(shard, count, context),
    close: () => inner.close(),
  }
}

const url = new URL(
  db === 'mysql'
    ? (process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test')
    : (process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'),
)
if (db === 'mysql') {
  const admin = await mysql.createConnection({ uri: url.toString() })
  await admin.query(`DROP DATABASE IF EXISTS ${args.database}`)
  await admin.query(`CREATE DATABASE ${args.database}`)
  await admin.end()
} else {
  const admin = new pg.Client({ connectionString: url.toString() })
  await admin.connect()
  await admin.query(`DROP DATABASE IF EXISTS ${args.database}`)
  await admin.query(`CREATE DATABASE ${args.database}`)
  await admin.end()
}
url.pathname = `/${args.database}`

const shared = new InProcessSource({ sharding, shards: 'all' })
// One generator for both sharded tables (one source per shard in a process); they take turns.
const variants = [
  { name: 'AUTO_INCREMENT / identity', entity: BulkAuto, table: 'bulk_auto', source: undefined },
  {
    name: '@ShardedId, per shard',
    entity: BulkPerShard,
    table: 'bulk_per_shard',
    source: perShardOnly(shared),
  },
  { name: '@ShardedId, ascending', entity: BulkAscending, table: 'bulk_ascending', source: shared },
].filter((variant) => args.tables === 'all' || variant.table !== 'bulk_per_shard')

const dataSources = new Map<string, DataSource>()
for (const variant of variants) {
  const dataSource = new DataSource({
    type: db === 'mysql' ? 'mariadb' : 'postgres',
    url: url.toString(),
    entities: [variant.entity],
    synchronize: true,
    logging: false,
  })
  if (variant.source) shardedIds(dataSource, { source: variant.source })
  await dataSource.initialize()
  dataSources.set(variant.table, dataSource)
}

await new Promise((resolve) => setTimeout(resolve, Number(args['warm-ms'])))

// One row order for every table: authors in a fixed pseudo-random order.
let seed = 12_345
const next = () => {
  seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648
  return seed
}
const batchesOfRows = Array.from({ length: batches }, (_, b) =>
  Array.from({ length: rows }, (_, i) => ({
    userId: String(next() % 100_000),
    title: `post ${b * rows + i} ${'x'.repeat(next() % 40)}`,
  })),
)

const ordered = { batches: 0 }
for (let b = 0; b < batches; b++) {
  // Alternate which table goes first; the sharded ones share the generator's clock either way.
  const order = b % 2 === 0 ? variants : [...variants].reverse()
  for (const variant of order) {
    const repository = dataSources.get(variant.table)!.getRepository(variant.entity)
    const posts = batchesOfRows[b]!.map((row) => repository.create({ ...row }))
    await repository.save(posts)
    if (variant.table === 'bulk_ascending') {
      const ids = posts.map((post) => BigInt(post.id!))
      if (ids.every((id, i) => i === 0 || id > ids[i - 1]!)) ordered.batches++
    }
  }
  if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs))
}

const sizes: Record<string, { leafPages?: number; pages?: number; bytes: number }> = {}
for (const variant of variants) {
  const dataSource = dataSources.get(variant.table)!
  if (db === 'mysql') {
    await dataSource.query(`ANALYZE TABLE ${variant.table} PERSISTENT FOR ALL`)
    const [leaf] = await dataSource.query(
      `SELECT stat_value AS v FROM mysql.innodb_index_stats WHERE database_name = DATABASE() AND table_name = ? AND index_name = 'PRIMARY' AND stat_name = 'n_leaf_pages'`,
      [variant.table],
    )
    const [pages] = await dataSource.query(
      `SELECT stat_value AS v FROM mysql.innodb_index_stats WHERE database_name = DATABASE() AND table_name = ? AND index_name = 'PRIMARY' AND stat_name = 'size'`,
      [variant.table],
    )
    const [size] = await dataSource.query(
      'SELECT data_length AS t FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = ?',
      [variant.table],
    )
    sizes[variant.name] = {
      leafPages: Number(leaf?.v),
      pages: Number(pages?.v),
      bytes: Number(size.t),
    }
  } else {
    await dataSource.query(`VACUUM ANALYZE ${variant.table}`)
    const [size] = await dataSource.query(
      `SELECT pg_relation_size(i.indexrelid) AS b FROM pg_index i WHERE i.indrelid = $1::regclass AND i.indisprimary`,
      [variant.table],
    )
    sizes[variant.name] = { bytes: Number(size.b) }
  }
}
for (const dataSource of dataSources.values()) await dataSource.destroy()
shared.close()

const base = sizes[variants[0]!.name]!
const report = {
  db,
  batches,
  rows,
  logicalShards,
  pauseMs,
  ascendingBatches: ordered.batches,
  sizes: Object.fromEntries(
    Object.entries(sizes).map(([name, size]) => [
      name,
      {
        ...size,
        ratio: Math.round((size.bytes / base.bytes) * 100) / 100,
        ...(size.leafPages && base.leafPages
          ? { leafRatio: Math.round((size.leafPages / base.leafPages) * 100) / 100 }
          : {}),
      },
    ]),
  ),
}
console.log(JSON.stringify(report, null, args.json ? 2 : undefined))
