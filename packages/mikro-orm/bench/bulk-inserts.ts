/**
 * Flushes of 1000 new entities (`em.create()`, in-process source: IDs given at create) into an
 * AUTO_INCREMENT (BIGSERIAL on PostgreSQL) table and into a sharded table, rows/s and the primary
 * key's size; and the same rows with IDs the application made beforehand, through a MikroORM
 * without `shardedIds()` (what MikroORM itself costs for a key it sends).
 *
 *   pnpm --filter @shardflake/mikro-orm build
 *   node packages/mikro-orm/bench/bulk-inserts.ts [--db mysql|postgres] [--rounds 5] [--batches 10]
 *     [--variants auto,sharded,given] [--fresh-connections]
 *
 * Each round empties the tables and flushes `--batches` units of `--rows` entities into each, the
 * tables taking turns flush by flush (which goes first rotates). A table's rows/s is its rows over
 * the time spent in its own `em.create()` calls and `flush()`; a round's ratio is the table's ÷
 * the AUTO_INCREMENT table's. Reported: the median ratio and the smallest and largest round's,
 * and per table this process's CPU time per row (`process.cpuUsage`) and, on PostgreSQL, the CPU
 * time and minor page faults of each table's one connection's server process (`/proc/<pid>/`:
 * run it on the database's machine).
 * Sizes after the last round: InnoDB leaf pages of the clustered index (after ANALYZE TABLE), or
 * `pg_relation_size` of the primary key index (after VACUUM ANALYZE).
 */
import { readFileSync } from 'node:fs'
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
    variants: { type: 'string', default: 'auto,sharded,given' },
    'fresh-connections': { type: 'boolean', default: false },
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

const allVariants = ['auto', 'sharded', 'given'] as const
type Variant = (typeof allVariants)[number]
/** `--variants sharded` (one table) for a CPU profile of its flushes. */
const variants = allVariants.filter((v) => args.variants.split(',').includes(v))

const source = new InProcessSource({ sharding, shards: 'all' })
const open = (entities: unknown[], extensions: unknown[] = []): Promise<MikroORM> => {
  const options = {
    clientUrl: dbUrl.toString(),
    entities,
    extensions,
    debug: false,
    // One connection: on PostgreSQL its server process's CPU time is read.
    pool: { min: 1, max: 1 },
  } as never
  return db === 'mysql' ? MariaDbOrm.init(options) : PostgresOrm.init(options)
}
// One MikroORM, hence one connection, per table: each table's INSERTs run on a server process
// that runs nothing else (the tables are created and emptied through connections of their own).
// A PostgreSQL server process that once freed a large block of memory keeps it (glibc raises its
// trim threshold) and no longer faults it in again on every 1000-row INSERT, which is worth
// several ms of server CPU per INSERT; sharing a connection would give one table that state.
const orms: Record<Variant, MikroORM> = {
  auto: await open([Auto]),
  sharded: await open([Sharded], [shardedIds({ source })]),
  given: await open([Given]),
}
const pidOf = async (orm: MikroORM) =>
  Number(
    (
      (await orm.em.getConnection().execute('SELECT pg_backend_pid() AS pid')) as { pid: number }[]
    )[0]!.pid,
  )
/** The server process of each table's one connection (PostgreSQL). */
const pids =
  db === 'postgres'
    ? {
        auto: await pidOf(orms.auto),
        sharded: await pidOf(orms.sharded),
        given: await pidOf(orms.given),
      }
    : undefined
// PostgreSQL: every connection first runs one statement with a 4 MB parameter, so that the three
// server processes start in the same state, that of a pool connection which has served a large
// statement once (`--fresh-connections` leaves them as they are: the table whose INSERTs happen to
// free a large block, here AUTO_INCREMENT's with its RETURNING, then faults less than the others).
if (pids && !args['fresh-connections']) {
  for (const orm of Object.values(orms)) {
    await orm.em.getConnection().execute('SELECT length(?) AS n', ['x'.repeat(4 << 20)])
  }
}
/** CPU time (ns) of a table's server process (`/proc/<pid>/schedstat`). */
const serverNs = (variant: Variant) =>
  pids ? Number(readFileSync(`/proc/${pids[variant]}/schedstat`, 'utf8').split(' ')[0]) : 0
/** Minor page faults of a table's server process (`/proc/<pid>/stat`, field 10). */
const serverFaults = (variant: Variant) => {
  if (!pids) return 0
  const stat = readFileSync(`/proc/${pids[variant]}/stat`, 'utf8')
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[7])
}

let seed = 12_345
const random = () => {
  seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648
  return seed
}
const tables: Record<Variant, string> = {
  auto: 'bulk_auto',
  sharded: 'bulk_sharded',
  given: 'bulk_given',
}

const rates: Record<Variant, number[]> = { auto: [], sharded: [], given: [] }
/** This process's and (PostgreSQL) the server process's CPU time per row, per round. */
const clientUs: Record<Variant, number[]> = { auto: [], sharded: [], given: [] }
const serverUs: Record<Variant, number[]> = { auto: [], sharded: [], given: [] }
/** Minor page faults of the server process per INSERT of `--rows` rows (PostgreSQL), per round. */
const faults: Record<Variant, number[]> = { auto: [], sharded: [], given: [] }
const ratios: Record<'sharded' | 'given', number[]> = { sharded: [], given: [] }
let ascending = 0
let flushes = 0
for (let round = 0; round < rounds; round++) {
  for (const variant of variants) await run(`TRUNCATE TABLE ${tables[variant]}`, dbUrl)
  const spent: Record<Variant, number> = { auto: 0, sharded: 0, given: 0 }
  const client: Record<Variant, number> = { auto: 0, sharded: 0, given: 0 }
  const server: Record<Variant, number> = { auto: 0, sharded: 0, given: 0 }
  const faulted: Record<Variant, number> = { auto: 0, sharded: 0, given: 0 }
  const measure = async (variant: Variant, work: () => Promise<void>) => {
    const faults0 = serverFaults(variant)
    const server0 = serverNs(variant)
    const cpu0 = process.cpuUsage()
    const start = process.hrtime.bigint()
    await work()
    spent[variant] += Number(process.hrtime.bigint() - start) / 1e9
    const cpu = process.cpuUsage(cpu0)
    client[variant] += cpu.user + cpu.system
    server[variant] += (serverNs(variant) - server0) / 1000
    faulted[variant] += serverFaults(variant) - faults0
  }
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
        const em = orms.given.em.fork()
        await measure('given', async () => {
          for (const row of given) em.create(Given, row)
          await em.flush()
        })
        continue
      }
      const em = orms[variant].em.fork()
      let made: { id?: unknown }[] = []
      await measure(variant, async () => {
        made =
          variant === 'auto'
            ? rows.map((row) => em.create(Auto, row))
            : rows.map((row) => em.create(Sharded, row))
        await em.flush()
      })
      if (variant === 'sharded') {
        flushes++
        const ids = made.map((entity) => BigInt(entity.id as bigint))
        if (ids.every((id, i) => i === 0 || id > ids[i - 1]!)) ascending++
      }
    }
  }
  for (const variant of variants) {
    rates[variant].push((batches * rowsPerFlush) / spent[variant])
    clientUs[variant].push(client[variant] / (batches * rowsPerFlush))
    serverUs[variant].push(server[variant] / (batches * rowsPerFlush))
    faults[variant].push(faulted[variant] / batches)
  }
  for (const name of ['sharded', 'given'] as const) {
    ratios[name].push(rates[name].at(-1)! / rates.auto.at(-1)!)
  }
}

const sizes: Record<string, Record<string, number>> = {}
for (const variant of variants) {
  const conn = orms[variant].em.getConnection()
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
const perRow = (of: Record<Variant, number[]>) =>
  Object.fromEntries(variants.map((v) => [v, Number(median(of[v]).toFixed(2))]))
const cpuRatios = (of: Record<Variant, number[]>) =>
  Object.fromEntries(
    (['sharded', 'given'] as const).map((v) => {
      const list = of[v].map((us, r) => us / of.auto[r]!)
      return [v, { median: median(list), min: Math.min(...list), max: Math.max(...list) }]
    }),
  )
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
      clientUsPerRow: perRow(clientUs),
      clientCpuRatio: cpuRatios(clientUs),
      ...(pids
        ? {
            serverUsPerRow: perRow(serverUs),
            serverCpuRatio: cpuRatios(serverUs),
            serverFaultsPerInsert: perRow(faults),
          }
        : {}),
      idsAscendingAtCreate: `${ascending} of ${flushes}`,
      sizes,
    },
    null,
    2,
  ),
)
for (const orm of Object.values(orms)) await orm.close(true)
source.close()
await run(`DROP DATABASE IF EXISTS ${args.database}`)
