/**
 * What routing by `shardedSequelize()` costs, Sequelize 6 on PostgreSQL (after
 * `pnpm --filter @shardflake/sequelize build`):
 *
 *   node bench/routed.bench.ts [--json] [--chart bench/routed.chart.json]
 *   (ROUNDS=21, DB_PREFIX=sf_bench_routed_sequelize_)
 *
 * The databases, the counting and the rounds are the shared routed harness's
 * (`bench-charts/src/routed.ts`): three databases of one PostgreSQL server play servers a, b and
 * c, each with a `Sequelize` and `shardedIds()`.
 *
 * 1. Statements: one `sharded.bulkCreate('Keyed', rows)` of 1000 rows over the 64 shards; the
 *    statements Sequelize sent each server are counted by its `logging` function.
 * 2. Overhead: the same `bulkCreate` of rows of server a's shards through the router and through
 *    a `Sequelize` that is not routed (same source, same model) over the connection pool of the
 *    router's server a: both sides write on the same connection, so on the same server process.
 */
import { ShardHomes } from '@shardflake/core'
import { shardedId, shardedIds, shardedSequelize } from '@shardflake/sequelize'
import { DataTypes, type ModelStatic, Sequelize } from 'sequelize'
import { routedBench, SERVERS } from '../../../bench-charts/src/routed.ts'

const bench = await routedBench({
  adapter: 'Sequelize 6.37.8',
  prefix: 'sf_bench_routed_sequelize_',
})
const { sharding, source, map, urls } = bench

function open(url: string, logging: () => void): Sequelize {
  const sequelize = new Sequelize(url, { logging, pool: { max: 2 } })
  shardedIds(sequelize, { source })
  sequelize.define(
    'Keyed',
    {
      id: shardedId({ shardBy: 'shardKey' }),
      shardKey: { type: DataTypes.TEXT, allowNull: false },
    },
    { tableName: 'keyed', timestamps: false, underscored: true },
  )
  return sequelize
}

interface ConnectionPool {
  drain(): Promise<void>
  destroyAllNow(): Promise<void>
}
/**
 * The connection pool of a Sequelize without replication. Sequelize 6's types leave it out of
 * `ConnectionManager`, so it is read, and replaced, as the property it is at run time.
 */
function poolOf(sequelize: Sequelize): ConnectionPool {
  const pool: unknown = Reflect.get(sequelize.connectionManager, 'pool')
  const { drain, destroyAllNow } = (pool ?? {}) as Partial<ConnectionPool>
  if (typeof drain !== 'function' || typeof destroyAllNow !== 'function') {
    throw new Error('This Sequelize has no connection pool at connectionManager.pool.')
  }
  return pool as ConnectionPool
}

const servers: Record<string, Sequelize> = {}
for (const name of SERVERS) servers[name] = open(urls[name], bench.countSent(name))
// Server a's pool through a Sequelize that is not routed, logging the same way: its own pool
// (empty until a query) gives way to server a's.
const direct = open(urls.a, () => {})
const ownPool = poolOf(direct)
await ownPool.drain()
await ownPool.destroyAllNow()
Reflect.set(direct.connectionManager, 'pool', poolOf(servers.a!))
const homes = await ShardHomes.open({ sharding, servers, directory: map })
const sharded = shardedSequelize(homes)
const DirectKeyed = direct.model('Keyed') as ModelStatic<never>

const overhead = await bench.compare({
  router: (size) => sharded.bulkCreate('Keyed', bench.rows(size)),
  direct: (size) => DirectKeyed.bulkCreate(bench.rows(size) as never[]),
})
const statements = await bench.statements(() =>
  sharded.bulkCreate('Keyed', bench.rows(1000, 'all')),
)
await bench.finish({ statements, overhead }, async () => {
  await homes.close()
  // Server a's Sequelize closes the pool the direct one shares.
  for (const made of Object.values(servers)) await made.close()
})
