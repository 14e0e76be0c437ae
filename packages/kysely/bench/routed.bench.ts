/**
 * `pnpm --filter @shardflake/kysely bench:routed` (after `pnpm build`): what `shardedKysely()`
 * costs, on PostgreSQL and on MariaDB.
 *
 *   node bench/routed.bench.ts [--json] [--chart bench/routed.chart.json]
 *   (ROUNDS=21, DIALECTS=postgres,mysql, DB_PREFIX=sf_bench_routed_kysely_)
 *
 * The databases, the counting and the rounds are the shared routed harness's
 * (`bench-charts/src/routed.ts`): three databases of the PostgreSQL (PG_URL) or MariaDB
 * (MYSQL_URL) server play servers a, b and c, each with a Kysely and the `shardedIds()` plugin.
 * `--chart` writes one chart per dialect (`routed-postgres.chart.json`, ...).
 *
 * 1. Statements: one 1000-row INSERT whose rows are spread over the three servers. PostgreSQL
 *    counts them with the harness's statement trigger; MariaDB with each server's session
 *    counter `Com_insert` (each server's pool holds one connection, so the session is the
 *    router's).
 * 2. Overhead: the same INSERT of rows of server a's shards through the router and directly
 *    through server a's Kysely.
 */
import { ShardHomes } from '@shardflake/core'
import { type ShardedId, shardedIds, shardedKysely } from '@shardflake/kysely'
import { Kysely, MysqlDialect, PostgresDialect, sql } from 'kysely'
import mysql from 'mysql2'
import pg from 'pg'
import { chartPath, type Dialect, routedBench, SERVERS } from '../../../bench-charts/src/routed.ts'

interface Database {
  keyed: { id: ShardedId; shard_key: string }
}

const dialects = (process.env.DIALECTS ?? 'postgres,mysql').split(',') as Dialect[]

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

async function benchDialect(dialect: Dialect) {
  const bench = await routedBench({
    adapter: `Kysely 0.29.9 on ${dialect === 'postgres' ? 'PostgreSQL' : 'MariaDB'}`,
    prefix: 'sf_bench_routed_kysely_',
    dialect,
    keyField: 'shard_key',
  })
  const ids = shardedIds<Database>({
    source: bench.source,
    tables: { keyed: { shardBy: 'shard_key' } },
  })
  const servers: Record<string, Kysely<Database>> = {}
  for (const name of SERVERS) {
    servers[name] = new Kysely<Database>({
      dialect: ids.dialect(kyselyDialect(dialect, bench.urls[name])),
      plugins: [ids],
      log: (event) => {
        if (event.level === 'query') bench.countSent(name)()
      },
    })
  }
  const homes = await ShardHomes.open({ sharding: bench.sharding, servers, directory: bench.map })
  const sharded = shardedKysely(homes)
  /** MariaDB: the INSERTs of each server's one session (the router's). */
  const comInsert = async () => {
    const counts = await Promise.all(
      SERVERS.map(async (name) => {
        const { rows } = await sql<{
          Value: string
        }>`SHOW SESSION STATUS LIKE 'Com_insert'`.execute(servers[name]!)
        return [name, Number(rows[0]!.Value)]
      }),
    )
    return Object.fromEntries(counts)
  }
  const direct = servers.a!
  const overhead = await bench.compare({
    router: (size) => sharded.insertInto('keyed').values(bench.rows(size)).execute(),
    direct: (size) => direct.insertInto('keyed').values(bench.rows(size)).execute(),
  })
  const statements = await bench.statements(
    () => sharded.insertInto('keyed').values(bench.rows(1000, 'all')).execute(),
    dialect === 'mysql' ? comInsert : undefined,
  )
  return bench.finish(
    { statements, overhead },
    async () => {
      await homes.close()
      for (const db of Object.values(servers)) await db.destroy()
    },
    { chart: chartPath?.replace(/(\.chart)?\.json$/, `-${dialect}$&`), print: false },
  )
}

const results: Record<string, unknown> = {}
for (const dialect of dialects) results[dialect] = await benchDialect(dialect)
if (process.argv.includes('--json')) console.log(JSON.stringify(results, null, 2))
