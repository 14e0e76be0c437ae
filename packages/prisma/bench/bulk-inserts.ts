/**
 * `createMany` of 1000 rows into an AUTO_INCREMENT (BIGSERIAL on PostgreSQL) table and into a
 * sharded table (in-process source, the extension's defaults), rows/s and the primary key's size;
 * and the same rows with IDs the application made beforehand through a client without the
 * extension (what Prisma itself costs for a key it sends).
 *
 *   node --experimental-transform-types --no-warnings=ExperimentalWarning \
 *     --conditions=@shardflake/source --import=./test/support/ts-hooks.mjs \
 *     bench/bulk-inserts.ts [--db mysql|postgres] [--rounds 5] [--batches 10]
 *   (from packages/prisma; it generates its client into the gitignored generated/bench-<db>)
 *
 * Each round empties the tables and sends `--batches` calls of `--rows` rows into each, the tables
 * taking turns call by call (which goes first rotates). A table's rows/s is its rows over the time
 * spent in its own `createMany` calls; a round's ratio is the table's ÷ the AUTO_INCREMENT table's.
 * Reported: the median ratio and the smallest and largest round's. Sizes after the last round:
 * InnoDB leaf pages of the clustered index (after ANALYZE TABLE), or `pg_relation_size` of the
 * primary key index (after VACUUM ANALYZE).
 */
import { parseArgs } from 'node:util'
import { PrismaMariaDb } from '@prisma/adapter-mariadb'
import { PrismaPg } from '@prisma/adapter-pg'
import { defineSharding, InProcessSource, instagram } from '@shardflake/core'
import mysql from 'mysql2/promise'
import pg from 'pg'
import { generatorFromSource, prismaGenerate } from '../test/global-setup.ts'

const { values: args } = parseArgs({
  options: {
    db: { type: 'string', default: 'mysql' },
    rounds: { type: 'string', default: '5' },
    batches: { type: 'string', default: '10' },
    rows: { type: 'string', default: '1000' },
    database: { type: 'string', default: 'h24_ascending_prisma_bench' },
  },
})
const db = args.db === 'postgres' ? 'postgres' : 'mysql'
const rounds = Number(args.rounds)
const batches = Number(args.batches)
const rowsPerCall = Number(args.rows)
const sharding = defineSharding({ layout: instagram, logicalShards: 16 })

const schema = `
generator client {
  provider = "prisma-client"
  output   = "./client"
}
generator shardflake {
  provider = "${generatorFromSource}"
  output   = "./shardflake"
}
datasource db {
  provider = "${db === 'mysql' ? 'mysql' : 'postgresql'}"
}
model BulkAuto {
  id     BigInt @id @default(autoincrement())
  userId BigInt @map("user_id")
  title  String
  @@map("bulk_auto")
}
model BulkSharded {
  /// @shardedId(shardBy: userId)
  id     BigInt @id @default(dbgenerated())
  userId BigInt @map("user_id")
  title  String
  @@map("bulk_sharded")
}
model BulkGiven {
  id     BigInt @id
  userId BigInt @map("user_id")
  title  String
  @@map("bulk_given")
}
`
const folder = await prismaGenerate(`bench-${db}`, schema)
const { PrismaClient } = (await import(`${folder}/client/client.ts`)) as {
  PrismaClient: new (options: object) => Client
}
const { shardedIds } = (await import(`${folder}/shardflake/index.ts`)) as {
  shardedIds: (options: object) => object
}
interface Row {
  id?: bigint
  userId: bigint
  title: string
}
interface Delegate {
  createMany(args: { data: Row[] }): Promise<{ count: number }>
}
interface Client {
  bulkAuto: Delegate
  bulkSharded: Delegate
  bulkGiven: Delegate
  $extends(extension: object): Client
  $disconnect(): Promise<void>
}

const url = new URL(
  db === 'mysql'
    ? (process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test')
    : (process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'),
)
async function run(sql: string, on = url): Promise<Record<string, unknown>[]> {
  if (db === 'mysql') {
    const connection = await mysql.createConnection({ uri: on.toString() })
    const [rows] = await connection.query(sql)
    await connection.end()
    return Array.isArray(rows) ? (rows as Record<string, unknown>[]) : []
  }
  const client = new pg.Client({ connectionString: on.toString() })
  await client.connect()
  const result = await client.query(sql)
  await client.end()
  return result.rows
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

function adapter() {
  if (db === 'postgres') return new PrismaPg({ connectionString: dbUrl.toString(), max: 4 })
  return new PrismaMariaDb({
    host: dbUrl.hostname,
    port: Number(dbUrl.port || 3306),
    user: decodeURIComponent(dbUrl.username),
    password: decodeURIComponent(dbUrl.password),
    database: args.database,
    connectionLimit: 4,
  })
}
const source = new InProcessSource({ sharding, shards: 'all' })
const plain = new PrismaClient({ adapter: adapter() })
const sharded = new PrismaClient({ adapter: adapter() }).$extends(shardedIds({ source }))

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
// Untimed: each client opens its connections on its first query.
await plain.bulkAuto.createMany({ data: [{ userId: 1n, title: 'warm-up' }] })
await plain.bulkGiven.createMany({ data: [{ id: 1n, userId: 1n, title: 'warm-up' }] })
await sharded.bulkSharded.createMany({ data: [{ userId: 1n, title: 'warm-up' }] })
const rates: Record<Variant, number[]> = { auto: [], sharded: [], given: [] }
const ratios: Record<'sharded' | 'given', number[]> = { sharded: [], given: [] }
for (let round = 0; round < rounds; round++) {
  for (const variant of variants) await run(`TRUNCATE TABLE ${tables[variant]}`, dbUrl)
  const spent: Record<Variant, number> = { auto: 0, sharded: 0, given: 0 }
  for (let b = 0; b < batches; b++) {
    const rows: Row[] = Array.from({ length: rowsPerCall }, (_, i) => ({
      userId: BigInt(random() % 100_000),
      title: `post ${b * rowsPerCall + i} ${'x'.repeat(random() % 40)}`,
    }))
    const shift = (round + b) % variants.length
    for (const variant of [...variants.slice(shift), ...variants.slice(0, shift)]) {
      let data = rows.map((row) => ({ ...row }))
      if (variant === 'given') {
        // Made before the timed call and sorted by ID, as the extension sends them.
        data = data
          .map((row) => ({ ...row, id: source.nextId(sharding.shardForKey(row.userId)) }))
          .sort((a, b) => (a.id < b.id ? -1 : 1))
      }
      const delegate =
        variant === 'auto'
          ? plain.bulkAuto
          : variant === 'given'
            ? plain.bulkGiven
            : sharded.bulkSharded
      const start = process.hrtime.bigint()
      await delegate.createMany({ data })
      spent[variant] += Number(process.hrtime.bigint() - start) / 1e9
    }
  }
  for (const variant of variants) rates[variant].push((batches * rowsPerCall) / spent[variant])
  for (const name of ['sharded', 'given'] as const) {
    ratios[name].push(rates[name].at(-1)! / rates.auto.at(-1)!)
  }
}

const sizes: Record<string, Record<string, number>> = {}
for (const variant of variants) {
  const table = tables[variant]
  if (db === 'mysql') {
    await run(`ANALYZE TABLE ${table} PERSISTENT FOR ALL`, dbUrl)
    const [leaf] = await run(
      `SELECT stat_value AS v FROM mysql.innodb_index_stats WHERE database_name = DATABASE() AND table_name = '${table}' AND index_name = 'PRIMARY' AND stat_name = 'n_leaf_pages'`,
      dbUrl,
    )
    sizes[variant] = { leafPages: Number(leaf?.v) }
  } else {
    await run(`VACUUM ANALYZE ${table}`, dbUrl)
    const [size] = await run(
      `SELECT pg_relation_size(i.indexrelid) AS pk, pg_relation_size(i.indrelid) AS t FROM pg_index i WHERE i.indrelid = '${table}'::regclass AND i.indisprimary`,
      dbUrl,
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
      orm: 'prisma',
      db,
      rounds,
      batches,
      rowsPerCall,
      ratioToAuto: Object.fromEntries(
        Object.entries(ratios).map(([name, list]) => [
          name,
          { median: median(list), min: Math.min(...list), max: Math.max(...list), rounds: list },
        ]),
      ),
      rowsPerSecond: Object.fromEntries(
        Object.entries(rates).map(([name, list]) => [name, Math.round(median(list))]),
      ),
      sizes,
    },
    null,
    2,
  ),
)
await plain.$disconnect()
await sharded.$disconnect()
source.close()
await run(`DROP DATABASE IF EXISTS ${args.database}`)
