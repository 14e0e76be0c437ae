/**
 * What routing by `shardedDatabases()` costs, Drizzle 0.45 (node-postgres) on PostgreSQL (after
 * `pnpm --filter @shardflake/drizzle build`):
 *
 *   node bench/routed.ts [--json] [--chart bench/routed.chart.json]
 *   (ROUNDS=21, DB_PREFIX=sf_bench_routed_drizzle_)
 *
 * The databases, the counting and the rounds are the shared routed harness's
 * (`bench-charts/src/routed.ts`): three databases of one PostgreSQL server play servers a, b and
 * c, each a Drizzle database.
 *
 * 1. Statements: one `sharded.insert(keyed, rows)` of 1000 rows over the 64 shards; the
 *    statements Drizzle sent each server are counted by its logger.
 * 2. Overhead: the same INSERT of rows of server a's shards through the router and as
 *    `db.insert(keyed).values(await ids.assign(keyed, rows))` on a Drizzle database of server a
 *    that is not routed (same source); with DIRECT=server-a, on server a's own database (the same
 *    pool as the router's writes there, and its home check).
 */
import { ShardHomes } from '@shardflake/core'
import { shardedDatabases, shardedId, shardedIds } from '@shardflake/drizzle'
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres'
import { bigint, pgTable, text } from 'drizzle-orm/pg-core'
import pg from 'pg'
import { routedBench, SERVERS } from '../../../bench-charts/src/routed.ts'

const keyed = pgTable('keyed', {
  id: shardedId(bigint({ mode: 'bigint' }), { shardBy: 'shardKey' }).primaryKey(),
  shardKey: text('shard_key').notNull(),
})

const bench = await routedBench({ adapter: 'Drizzle 0.45.4', prefix: 'sf_bench_routed_drizzle_' })
const { sharding, source, map, urls } = bench

const pools: pg.Pool[] = []
function open(url: string, onQuery: () => void): NodePgDatabase {
  const pool = new pg.Pool({ connectionString: url, max: 2 })
  pools.push(pool)
  return drizzle({ client: pool, logger: { logQuery: onQuery } })
}

const servers: Record<string, NodePgDatabase> = {}
for (const name of SERVERS) servers[name] = open(urls[name], bench.countSent(name))
// Server a's database through a Drizzle database that is not routed, logging the same way.
const direct = open(urls.a, () => {})
const ids = shardedIds(servers.a!, { source, schema: { keyed } })
const homes = await ShardHomes.open({ sharding, servers, directory: map })
const sharded = shardedDatabases(homes, ids)
// DIRECT=server-a: the direct side writes through server a's own database (the router's pool and
// connections, its home check included) instead of one of its own.
const baseline = process.env.DIRECT === 'server-a' ? servers.a! : direct

const overhead = await bench.compare({
  router: (size) => sharded.insert(keyed, bench.rows(size)),
  direct: async (size) => baseline.insert(keyed).values(await ids.assign(keyed, bench.rows(size))),
})
const statements = await bench.statements(() => sharded.insert(keyed, bench.rows(1000, 'all')))
await bench.finish({ statements, overhead }, async () => {
  ids.close()
  await homes.close()
  for (const pool of pools) await pool.end()
})
