/**
 * Flushes of 1000 new entities (`em.create()`, in-process source: IDs given at create) into an
 * AUTO_INCREMENT (BIGSERIAL on PostgreSQL) table and into a sharded table, rows/s and the primary
 * key's size; and the same rows with IDs the application made beforehand, through a MikroORM
 * without `shardedIds()` (what MikroORM itself costs for a key it sends).
 *
 *   pnpm --filter @shardflake/mikro-orm build
 *   node packages/mikro-orm/bench/bulk-inserts.ts [--db mysql|postgres] [--rounds 5] [--batches 10]
 *
 * Each round empties the tables and flushes `--batches` units of `--rows` entities into each, the
 * tables taking turns flush by flush (which goes first rotates). A table's rows/s is its rows over
 * the time spent in its own `em.create()` calls and `flush()`; a round's ratio is the table's ÷
 * the AUTO_INCREMENT table's. Reported: the median ratio and the smallest and largest round's.
 * Sizes after the last round: InnoDB leaf pages of the clustered index (after ANALYZE TABLE), or
 * `pg_relation_size` of the primary key index (after VACUUM ANALYZE).
 */
import { parseArgs } from 'node:util'
import { defineEntity, type MikroORM, p } from '@mikro-orm/core'
import { MikroORM as MariaDbOrm } from '@mikro-orm/mariadb'
import { MikroORM as PostgresOrm } from '@mikro-orm/postgresql'
import { defineSharding, InProcessSource, instagram } from '@shardflake/core'
import { shardedId, shardedIds } from '@shardflake/mikro-orm'
import mysql from 'mysql2/promise'
import pg from 'pg'

const { values: args } = parseArgs({
  options: {
    db: { type: 'string', default: 'mysql' },
    rounds: { type: 'string', default: '5' },
    batches: { type: 'string', default: '10' },
    rows: { type: 'string', default: '1000' },
    database: { type: 'string', default: 'h24_ascending_mikro_bench' },
  },
})
const db = args.db === 'postgres' ? 'postgres' : 'mysql'
const rounds = Number(args.rounds)
const batches = Number(args.batches)
const rowsPerFlush = Number(args.rows)
const sharding = defineSharding({ layout: instagram, logicalShards: 16 })

const Auto = defineEntity({
  name: 'BulkAuto',
  tableName: 'bulk_auto',
  properties: {
    id: p.bigint().primary().autoincrement(),
    userId: p.bigint(),
    title: p.string(),
  },
})
const Sharded = defineEntity({
  name: 'BulkSharded',
  tableName: 'bulk_sharded',
  properties: {
    id: shardedId<{ userId: bigint }>({ shardBy: 'userId' }),
    userId: p.bigint(),
    title: p.string(),
  },
})
const Given = defineEntity({
  name: 'BulkGiven',
  tableName: 'bulk_given',
  properties: {
    id: p.bigint().primary().autoincrement(false),
    userId: p.bigint(),
    title: p.string(),
  },
})

const url = new URL(
  db === 'mysql'
    ? (process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test')
    : (process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'),
)
async function run(sql: string, on = url): Promise<void> {
  if (db === 'mysql') {
    const connection = await mysql.createConnection({ uri: on.toString() })
    await connection.query(sql)
    await connection.end()
  } else {
    const client = new pg.Client({ connectionString: on.toString() })
    await client.connect()
    await client.query(sql)
    await client.end()
  }
}
await run(`DROP DATABASE IF EXISTS ${args.database}`)
await run(`CREATE DATABASE ${args.database}`)
const dbUrl = new URL(url)
dbUrl.pathname = `/${args.database}`
const text = db === 'mysql' ? 'VARCHAR(200)' : 'TEXT'
for (const [table, key] of [
  ['bulk_auto', db === 'mysql' ? 'BIGINT NOT NULL AUTO_INCREMENT' : 'BIGSERIAL'],
  ['bulk_sharded', 'BIGINT NOT NULL'],
  ['bulk_given', 'BIGINT NOT NULL'],
] as const) {
  await run(
    `CREATE TABLE ${table} (id ${key} PRIMARY KEY, user_id BIGINT NOT NULL, title ${text} NOT NULL)`,
    dbUrl,
  )
}

const source = new InProcessSource({ sharding, shards: 'all' })
const open = (entities: unknown[], extensions: unknown[] = []): Promise<MikroORM> => {
  const options = {
    clientUrl: dbUrl.toString(),
    entities,
    extensions,
    debug: false,
  } as never
  return db === 'mysql' ? MariaDbOrm.init(options) : PostgresOrm.init(options)
}
const plainOrm = await open([Auto, Given])
const shardedOrm = await open([Sharded], [shardedIds({ source })])

let seed = 12_345
const random = () => {
  seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648
  return seed
}
const variants = ['auto', 'sharded', 'given'] as const
type Variant = (typeof variants)[number]
const tables: Record<Variant, string> = {
  auto: 'bulk_auto',
  sharded: 'bulk_sharded',
  given: 'bulk_given',
}

const rates: Record<Variant, number[]> = { auto: [], sharded: [], given: [] }
const ratios: Record<'sharded' | 'given', number[]> = { sharded: [], given: [] }
let ascending = 0
let flushes = 0
for (let round = 0; round < rounds; round++) {
  for (const variant of variants) await run(`TRUNCATE TABLE ${tables[variant]}`, dbUrl)
  const spent: Record<Variant, number> = { auto: 0, sharded: 0, given: 0 }
  for (let b = 0; b < batches; b++) {
    const rows = Array.from({ length: rowsPerFlush }, (_, i) => ({
      userId: BigInt(random() % 100_000),
      title: `post ${b * rowsPerFlush + i} ${'x'.repeat(random() % 40)}`,
    }))
    const shift = (round + b) % variants.length
    for (const variant of [...variants.slice(shift), ...variants.slice(0, shift)]) {
      if (variant === 'given') {
        // IDs made before the timed part, one at a time as em.create() gives them.
        const given = rows.map((row) => ({
          ...row,
          id: source.nextId(sharding.shardForKey(row.userId)),
        }))
        const em = plainOrm.em.fork()
        const start = process.hrtime.bigint()
        for (const row of given) em.create(Given, row)
        await em.flush()
        spent.given += Number(process.hrtime.bigint() - start) / 1e9
        continue
      }
      const em = (variant === 'auto' ? plainOrm : shardedOrm).em.fork()
      const start = process.hrtime.bigint()
      const made =
        variant === 'auto'
          ? rows.map((row) => em.create(Auto, row))
          : rows.map((row) => em.create(Sharded, row))
      await em.flush()
      spent[variant] += Number(process.hrtime.bigint() - start) / 1e9
      if (variant === 'sharded') {
        flushes++
        const ids = made.map((entity) => BigInt(entity.id as bigint))
        if (ids.every((id, i) => i === 0 || id > ids[i - 1]!)) ascending++
      }
    }
  }
  for (const variant of variants) rates[variant].push((batches * rowsPerFlush) / spent[variant])
  for (const name of ['sharded', 'given'] as const) {
    ratios[name].push(rates[name].at(-1)! / rates.auto.at(-1)!)
  }
}

const sizes: Record<string, Record<string, number>> = {}
for (const variant of variants) {
  const conn = (variant === 'sharded' ? shardedOrm : plainOrm).em.getConnection()
  const table = tables[variant]
  if (db === 'mysql') {
    await conn.execute(`ANALYZE TABLE ${table} PERSISTENT FOR ALL`)
    const [leaf] = await conn.execute(
      `SELECT stat_value AS v FROM mysql.innodb_index_stats WHERE database_name = DATABASE() AND table_name = ? AND index_name = 'PRIMARY' AND stat_name = 'n_leaf_pages'`,
      [table],
    )
    const [size] = await conn.execute(
      'SELECT data_length AS d FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = ?',
      [table],
    )
    sizes[variant] = { leafPages: Number(leaf?.v), dataBytes: Number(size?.d) }
  } else {
    await conn.execute(`VACUUM ANALYZE ${table}`)
    const [size] = await conn.execute(
      `SELECT pg_relation_size(i.indexrelid) AS pk, pg_relation_size(i.indrelid) AS t FROM pg_index i WHERE i.indrelid = '${table}'::regclass AND i.indisprimary`,
    )
    sizes[variant] = { pkIndexBytes: Number(size?.pk), tableBytes: Number(size?.t) }
  }
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}
console.log(
  JSON.stringify(
    {
      orm: 'mikro-orm',
      db,
      rounds,
      batches,
      rowsPerFlush,
      ratioToAuto: Object.fromEntries(
        Object.entries(ratios).map(([name, list]) => [
          name,
          { median: median(list), min: Math.min(...list), max: Math.max(...list), rounds: list },
        ]),
      ),
      rowsPerSecond: Object.fromEntries(
        Object.entries(rates).map(([name, list]) => [name, Math.round(median(list))]),
      ),
      idsAscendingAtCreate: `${ascending} of ${flushes}`,
      sizes,
    },
    null,
    2,
  ),
)
await plainOrm.close(true)
await shardedOrm.close(true)
source.close()
await run(`DROP DATABASE IF EXISTS ${args.database}`)
