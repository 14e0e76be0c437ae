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
 *    `db.insert(keyed).values(await ids.assign(keyed, rows))` on a Drizzle database that is not
 *    routed (same source) over the pool of the router's server a: both sides write on the same
 *    connection, so on the same server process.
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

const pools: Record<string, pg.Pool> = {}
const servers: Record<string, NodePgDatabase> = {}
for (const name of SERVERS) {
  pools[name] = new pg.Pool({ connectionString: urls[name], max: 2 })
  servers[name] = drizzle({ client: pools[name], logger: { logQuery: bench.countSent(name) } })
}
// Server a's pool through a Drizzle database that is not routed, logging the same way.
const direct = drizzle({ client: pools.a!, logger: { logQuery: () => {} } })
const ids = shardedIds(servers.a!, { source, schema: { keyed } })
const homes = await ShardHomes.open({ sharding, servers, directory: map })
const sharded = shardedDatabases(homes, ids)

const overhead = await bench.compare({
  router: (size) => sharded.insert(keyed, bench.rows(size)),
  direct: async (size) => direct.insert(keyed).values(await ids.assign(keyed, bench.rows(size))),
})
const statements = await bench.statements(() => sharded.insert(keyed, bench.rows(1000, 'all')))
await bench.finish({ statements, overhead }, async () => {
  ids.close()
  await homes.close()
  for (const pool of Object.values(pools)) await pool.end()
})
