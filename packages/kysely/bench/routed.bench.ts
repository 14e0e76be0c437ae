/**
 * `pnpm --filter @shardflake/kysely bench:routed` (after `pnpm build`): what `shardedKysely()`
 * costs.
 *
 * 1. Statements: one 1000-row INSERT whose rows are spread over three servers, counted by the
 *    servers themselves. MariaDB: each server's session counter `Com_insert` (each server's pool
 *    holds one connection, so the session is the router's). PostgreSQL: a statement-level
 *    trigger on the table. Expected: one INSERT per server.
 * 2. Overhead: the same INSERT through the router and directly through the server's Kysely (rows
 *    of that server only), in rounds of A-B-B-A slices of back-to-back inserts (which side goes
 *    first alternates);
 *    ratio = router time / direct time per round (above 1: the router is slower), median over
 *    rounds with the smallest and largest round; the same for this process's CPU time (building,
 *    compiling, routing). Single rows and batches of 1000.
 *
 * The three "servers" are databases on the PostgreSQL (PG_URL, default
 * postgres://postgres@127.0.0.1:5432/test) and MariaDB (MYSQL_URL, default
 * mysql://root@127.0.0.1:3306/test) servers: their names start with DB_PREFIX (default
 * `sf_bench_routed_`), dropped at the end.
 * ROUNDS (default 11, the first a warm-up is dropped), DIALECTS=postgres,mysql. `--json` prints JSON only.
 */
import { loadavg } from 'node:os'
import { defineSharding, InProcessSource, instagram, ShardHomes, ShardMap } from '@shardflake/core'
import { type ShardedId, shardedIds, shardedKysely } from '@shardflake/kysely'
import { Kysely, MysqlDialect, PostgresDialect, sql } from 'kysely'
import mysql from 'mysql2'
import mysqlPromise from 'mysql2/promise'
import pg from 'pg'

type Dialect = 'postgres' | 'mysql'
interface Database {
  keyed: { id: ShardedId; shard_key: string }
}

const json = process.argv.includes('--json')
const rounds = Number(process.env.ROUNDS ?? 11)
const dialects = (process.env.DIALECTS ?? 'postgres,mysql').split(',') as Dialect[]
const pgUrl = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const myUrl = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test'
const NAMES = ['a', 'b', 'c']
const prefix = process.env.DB_PREFIX ?? 'sf_bench_routed_'
if (!/^[a-z_][a-z0-9_]{0,40}$/.test(prefix))
  throw new Error(`DB_PREFIX: not a safe name: ${prefix}`)
const log = (line: string) => {
  if (!json) console.log(line)
}

const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
// One source for the run: a logical shard has one generator per process.
const source = new InProcessSource({ sharding, shards: 'all' })
const map = new ShardMap(sharding, [
  { from: 0, to: 20, target: 'a' },
  { from: 21, to: 41, target: 'b' },
  { from: 42, to: 63, target: 'c' },
])

function urlOf(dialect: Dialect, database: string): string {
  const url = new URL(dialect === 'postgres' ? pgUrl : myUrl)
  url.pathname = `/${database}`
  return url.toString()
}

/** Creates (afresh) the database of server `name` and its table; returns its URL. */
async function createDatabase(dialect: Dialect, name: string): Promise<string> {
  const database = `${prefix}${name}`
  if (dialect === 'postgres') {
    const admin = new pg.Client({ connectionString: pgUrl })
    await admin.connect()
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
    await admin.query(`CREATE DATABASE ${database}`)
    await admin.end()
    const client = new pg.Client({ connectionString: urlOf(dialect, database) })
    await client.connect()
    await client.query('CREATE TABLE keyed (id BIGINT PRIMARY KEY, shard_key TEXT NOT NULL)')
    await client.query('CREATE TABLE insert_statements (n INT)')
    await client.query(`CREATE FUNCTION count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN INSERT INTO insert_statements VALUES (1); RETURN NULL; END $$`)
    await client.query(
      'CREATE TRIGGER keyed_statements AFTER INSERT ON keyed FOR EACH STATEMENT EXECUTE FUNCTION count_insert()',
    )
    await client.end()
  } else {
    const admin = await mysqlPromise.createConnection(myUrl)
    await admin.query(`DROP DATABASE IF EXISTS ${database}`)
    await admin.query(`CREATE DATABASE ${database}`)
    await admin.query(
      `CREATE TABLE ${database}.keyed (id BIGINT PRIMARY KEY, shard_key VARCHAR(20) NOT NULL)`,
    )
    await admin.end()
  }
  return urlOf(dialect, database)
}

async function dropDatabase(dialect: Dialect, name: string): Promise<void> {
  const database = `${prefix}${name}`
  if (dialect === 'postgres') {
    const admin = new pg.Client({ connectionString: pgUrl })
    await admin.connect()
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
    await admin.end()
  } else {
    const admin = await mysqlPromise.createConnection(myUrl)
    await admin.query(`DROP DATABASE IF EXISTS ${database}`)
    await admin.end()
  }
}

function kyselyDialect(dialect: Dialect, url: string) {
  if (dialect === 'postgres') {
    return new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 1 }) })
  }
  return new MysqlDialect({
    pool: mysql.createPool({
      uri: url,
      connectionLimit: 1,
      supportBigNumbers: true,
      bigNumberStrings: true,
    }),
  })
}

/** INSERT statements on `keyed` the server counted so far. */
async function insertsCounted(dialect: Dialect, db: Kysely<Database>): Promise<number> {
  if (dialect === 'postgres') {
    const { rows } = await sql<{
      n: number
    }>`SELECT count(*)::int AS n FROM insert_statements`.execute(db)
    return rows[0]!.n
  }
  const { rows } = await sql<{ Value: string }>`SHOW SESSION STATUS LIKE 'Com_insert'`.execute(db)
  return Number(rows[0]!.Value)
}

const median = (values: number[]) => {
  const sorted = [...values].sort((x, y) => x - y)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** Wall time and this process's CPU time (user + system) of `times` runs, in ms. */
async function timed(
  run: () => Promise<unknown>,
  times: number,
): Promise<{ ms: number; cpu: number }> {
  const start = performance.now()
  const cpu = process.cpuUsage()
  for (let i = 0; i < times; i++) await run()
  const used = process.cpuUsage(cpu)
  return { ms: performance.now() - start, cpu: (used.user + used.system) / 1000 }
}

async function benchDialect(dialect: Dialect) {
  const urls: Record<string, string> = {}
  for (const name of NAMES) urls[name] = await createDatabase(dialect, name)
  const ids = shardedIds<Database>({
    source,
    tables: { keyed: { shardBy: 'shard_key' } },
  })
  const servers: Record<string, Kysely<Database>> = {}
  for (const name of NAMES) {
    servers[name] = new Kysely<Database>({
      dialect: ids.dialect(kyselyDialect(dialect, urls[name]!)),
      plugins: [ids],
    })
  }
  const homes = await ShardHomes.open({ sharding, servers, directory: map })
  const sharded = shardedKysely(homes)
  try {
    // 1. One 1000-row INSERT over three servers.
    const spread = Array.from({ length: 1000 }, (_, i) => ({ shard_key: String(i % 64) }))
    const before = await Promise.all(NAMES.map((name) => insertsCounted(dialect, servers[name]!)))
    await sharded.insertInto('keyed').values(spread).execute()
    const after = await Promise.all(NAMES.map((name) => insertsCounted(dialect, servers[name]!)))
    const statements = Object.fromEntries(NAMES.map((name, i) => [name, after[i]! - before[i]!]))
    const rowsOn: Record<string, number> = {}
    for (const name of NAMES) {
      const { rows } = await sql<{
        n: string | number
      }>`SELECT count(*) AS n FROM keyed`.execute(servers[name]!)
      rowsOn[name] = Number(rows[0]!.n)
    }
    log(
      `${dialect}: one 1000-row INSERT over 3 servers -> INSERT statements per server ${JSON.stringify(statements)}, rows ${JSON.stringify(rowsOn)}`,
    )

    // 2. Router vs direct, rows of server a only (shards 0-20).
    const direct = servers.a!
    const shapes = [
      { name: '1 row', rows: 1, times: 100 },
      { name: '1000 rows', rows: 1000, times: 5 },
    ]
    const overhead: Record<
      string,
      { median: number; min: number; max: number; cpuMedian: number; rounds: number }
    > = {}
    for (const shape of shapes) {
      const values = () =>
        Array.from({ length: shape.rows }, (_, i) => ({ shard_key: String(i % 21) }))
      const ratios: number[] = []
      const cpuRatios: number[] = []
      for (let round = 0; round < rounds; round++) {
        const viaRouter = () => sharded.insertInto('keyed').values(values()).execute()
        const viaDirect = () => direct.insertInto('keyed').values(values()).execute()
        // A-B-B-A: each side runs first and last once per round.
        const first = round % 2 === 0 ? viaRouter : viaDirect
        const second = first === viaRouter ? viaDirect : viaRouter
        const t1 = await timed(first, shape.times)
        const t2 = await timed(second, shape.times)
        const t3 = await timed(second, shape.times)
        const t4 = await timed(first, shape.times)
        const sum = (x: { ms: number; cpu: number }, y: { ms: number; cpu: number }) => ({
          ms: x.ms + y.ms,
          cpu: x.cpu + y.cpu,
        })
        const router = first === viaRouter ? sum(t1, t4) : sum(t2, t3)
        const plain = first === viaRouter ? sum(t2, t3) : sum(t1, t4)
        if (round > 0) {
          ratios.push(router.ms / plain.ms)
          cpuRatios.push(router.cpu / plain.cpu)
        }
        await sql`DELETE FROM keyed`.execute(direct)
      }
      overhead[shape.name] = {
        median: median(ratios),
        min: Math.min(...ratios),
        max: Math.max(...ratios),
        cpuMedian: median(cpuRatios),
        rounds: ratios.length,
      }
      const o = overhead[shape.name]!
      log(
        `${dialect}: ${shape.name} per INSERT, router / direct time: median ${o.median.toFixed(3)} (${o.min.toFixed(3)}..${o.max.toFixed(3)}) over ${o.rounds} rounds of 4 x ${shape.times}; client CPU router / direct: median ${o.cpuMedian.toFixed(3)}`,
      )
    }
    return { statements, rowsOn, overhead }
  } finally {
    await homes.close()
    for (const db of Object.values(servers)) await db.destroy()
    for (const name of NAMES) await dropDatabase(dialect, name)
  }
}

const results: Record<string, unknown> = { loadavg: loadavg() }
log(
  `load average at start: ${loadavg()
    .map((n) => n.toFixed(1))
    .join(' ')} (a shared, noisy machine)`,
)
for (const dialect of dialects) results[dialect] = await benchDialect(dialect)
await source.close()
results.loadavgEnd = loadavg()
log(
  `load average at end: ${loadavg()
    .map((n) => n.toFixed(1))
    .join(' ')}`,
)
if (json) console.log(JSON.stringify(results, null, 2))
