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
 * Reported: the median ratio and the smallest and largest round's, and per variant this process's
 * CPU time per row (`process.cpuUsage`: Prisma's query compiler runs here) and, on PostgreSQL, the
 * CPU time per row of the variant's server process (each variant has its own client and one
 * connection, warmed by one untimed call of the timed size; `/proc/<pid>/schedstat`: run it on the
 * database's machine). `--variants auto,sharded,given,given-string,auto-return,sharded-return`
 * adds the keys as decimal strings and `createManyAndReturn` (PostgreSQL). Sizes after the last round:
 * InnoDB leaf pages of the clustered index (after ANALYZE TABLE), or `pg_relation_size` of the
 * primary key index (after VACUUM ANALYZE).
 */
import { readFileSync } from 'node:fs'
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
    /** Also `given-string` (IDs as decimal strings, as the extension hands them to Prisma) and
     * `auto-return` / `sharded-return` (`createManyAndReturn`). */
    variants: { type: 'string', default: 'auto,sharded,given' },
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
  /** A BigInt field takes a bigint, or its decimal string (what the extension sends). */
  id?: bigint | string
  userId: bigint
  title: string
}
interface Delegate {
  createMany(args: { data: Row[] }): Promise<{ count: number }>
  createManyAndReturn(args: { data: Row[] }): Promise<Row[]>
}
interface Client {
  bulkAuto: Delegate
  bulkSharded: Delegate
  bulkGiven: Delegate
  $extends(extension: object): Client
  $disconnect(): Promise<void>
  $queryRawUnsafe(sql: string): Promise<{ pid: number }[]>
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
  // One connection per client: on PostgreSQL its server process's CPU time is read.
  if (db === 'postgres') return new PrismaPg({ connectionString: dbUrl.toString(), max: 1 })
  return new PrismaMariaDb({
    host: dbUrl.hostname,
    port: Number(dbUrl.port || 3306),
    user: decodeURIComponent(dbUrl.username),
    password: decodeURIComponent(dbUrl.password),
    database: args.database,
    connectionLimit: 1,
  })
}
const source = new InProcessSource({ sharding, shards: 'all' })

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}
let seed = 12_345
const random = () => {
  seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648
  return seed
}
const allVariants = [
  'auto',
  'sharded',
  'given',
  'given-string',
  'auto-return',
  'sharded-return',
] as const
type Variant = (typeof allVariants)[number]
const variants = args.variants
  .split(',')
  .filter((name): name is Variant => (allVariants as readonly string[]).includes(name))
const tables: Record<Variant, string> = {
  auto: 'bulk_auto',
  sharded: 'bulk_sharded',
  given: 'bulk_given',
  'given-string': 'bulk_given',
  'auto-return': 'bulk_auto',
  'sharded-return': 'bulk_sharded',
}
// Each variant has its own client and connection (its own server process): a server process
// that ran large statements before pays less CPU per INSERT than a fresh one, so no variant's
// process may have run more of them than another's. Untimed: each client opens its connection
// and sends one call of the timed size first (then the tables are emptied every round).
const clients = Object.fromEntries(
  variants.map((v) => {
    const client = new PrismaClient({ adapter: adapter() })
    return [v, v.startsWith('sharded') ? client.$extends(shardedIds({ source })) : client]
  }),
) as Record<Variant, Client>
const delegateOf = (variant: Variant) =>
  variant.startsWith('auto')
    ? clients[variant].bulkAuto
    : variant.startsWith('given')
      ? clients[variant].bulkGiven
      : clients[variant].bulkSharded
/** The rows of one call: the same for every variant, IDs made beforehand for `given`. */
function dataFor(variant: Variant, rows: readonly Row[]): Row[] {
  let data = rows.map((row) => ({ ...row }))
  if (variant === 'given' || variant === 'given-string') {
    // Made before the timed call and sorted by ID, as the extension sends them.
    data = data
      .map((row) => ({ ...row, id: source.nextId(sharding.shardForKey(row.userId)) }))
      .sort((a, b) => (a.id < b.id ? -1 : 1))
    // A decimal string for a BigInt field: what the extension hands Prisma for createMany.
    if (variant === 'given-string') data = data.map((row) => ({ ...row, id: String(row.id) }))
  }
  return data
}
const warmRows: Row[] = Array.from({ length: rowsPerCall }, (_, i) => ({
  userId: BigInt(i),
  title: `warm-up ${i}`,
}))
for (const variant of variants) {
  const data = dataFor(variant, warmRows)
  if (variant.endsWith('-return')) await delegateOf(variant).createManyAndReturn({ data })
  else await delegateOf(variant).createMany({ data })
}
/** Server CPU time (ns) of each client's one connection (PostgreSQL: `/proc/<pid>/schedstat`). */
const pids: Partial<Record<Variant, number>> = {}
if (db === 'postgres') {
  for (const variant of variants) {
    const [row] = await clients[variant].$queryRawUnsafe('SELECT pg_backend_pid() AS pid')
    pids[variant] = Number(row!.pid)
  }
}
const serverNs = (variant: Variant) =>
  pids[variant] === undefined
    ? 0
    : Number(readFileSync(`/proc/${pids[variant]}/schedstat`, 'utf8').split(' ')[0])
const rates = Object.fromEntries(variants.map((v) => [v, [] as number[]])) as Record<
  Variant,
  number[]
>
const clientUs = Object.fromEntries(variants.map((v) => [v, [] as number[]])) as Record<
  Variant,
  number[]
>
const serverUs = Object.fromEntries(variants.map((v) => [v, [] as number[]])) as Record<
  Variant,
  number[]
>
const baselineOf = (variant: Variant): Variant =>
  variant.endsWith('-return') ? 'auto-return' : 'auto'
for (let round = 0; round < rounds; round++) {
  for (const table of new Set(variants.map((v) => tables[v])))
    await run(`TRUNCATE TABLE ${table}`, dbUrl)
  const spent = Object.fromEntries(variants.map((v) => [v, { wall: 0, client: 0, server: 0 }]))
  for (let b = 0; b < batches; b++) {
    const rows: Row[] = Array.from({ length: rowsPerCall }, (_, i) => ({
      userId: BigInt(random() % 100_000),
      title: `post ${b * rowsPerCall + i} ${'x'.repeat(random() % 40)}`,
    }))
    const shift = (round + b) % variants.length
    for (const variant of [...variants.slice(shift), ...variants.slice(0, shift)]) {
      const data = dataFor(variant, rows)
      const delegate = delegateOf(variant)
      const server0 = serverNs(variant)
      const cpu0 = process.cpuUsage()
      const start = process.hrtime.bigint()
      if (variant.endsWith('-return')) await delegate.createManyAndReturn({ data })
      else await delegate.createMany({ data })
      const entry = spent[variant]!
      entry.wall += Number(process.hrtime.bigint() - start) / 1e9
      const cpu = process.cpuUsage(cpu0)
      entry.client += cpu.user + cpu.system
      entry.server += (serverNs(variant) - server0) / 1000
    }
  }
  const total = batches * rowsPerCall
  for (const variant of variants) {
    rates[variant].push(total / spent[variant]!.wall)
    clientUs[variant].push(spent[variant]!.client / total)
    serverUs[variant].push(spent[variant]!.server / total)
  }
}
const ratios = Object.fromEntries(
  variants
    .filter((v) => v !== baselineOf(v) && variants.includes(baselineOf(v)))
    .map((v) => [v, rates[v].map((rate, r) => rate / rates[baselineOf(v)][r]!)]),
)
const cpuRatios = (of: Record<Variant, number[]>) =>
  Object.fromEntries(
    Object.keys(ratios).map((name) => {
      const v = name as Variant
      const list = of[v].map((us, r) => us / of[baselineOf(v)][r]!)
      return [v, { median: median(list), min: Math.min(...list), max: Math.max(...list) }]
    }),
  )

const sizes: Record<string, Record<string, number>> = {}
for (const variant of variants.filter((v) => !v.includes('-'))) {
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
      /** This process's CPU time per row (the query compiler runs in it), median of rounds. */
      clientUsPerRow: Object.fromEntries(
        Object.entries(clientUs).map(([name, list]) => [name, Number(median(list).toFixed(2))]),
      ),
      clientCpuRatio: cpuRatios(clientUs),
      ...(db === 'postgres'
        ? {
            serverUsPerRow: Object.fromEntries(
              Object.entries(serverUs).map(([name, list]) => [
                name,
                Number(median(list).toFixed(2)),
              ]),
            ),
            serverCpuRatio: cpuRatios(serverUs),
          }
        : {}),
      sizes,
    },
    null,
    2,
  ),
)
for (const client of Object.values(clients)) await client.$disconnect()
source.close()
await run(`DROP DATABASE IF EXISTS ${args.database}`)
