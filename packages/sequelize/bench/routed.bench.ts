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
 *    a `Sequelize` on server a's database that is not routed (same source, same model).
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

const servers: Record<string, Sequelize> = {}
for (const name of SERVERS) servers[name] = open(urls[name], bench.countSent(name))
// Server a's database through a Sequelize that is not routed, logging the same way.
const direct = open(urls.a, () => {})
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
  for (const made of [...Object.values(servers), direct]) await made.close()
})
