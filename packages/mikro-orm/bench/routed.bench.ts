/**
 * What routing by `shardedOrms()` costs, MikroORM 7 on PostgreSQL (after
 * `pnpm --filter @shardflake/mikro-orm build`):
 *
 *   node bench/routed.bench.ts [--json] [--chart bench/routed.chart.json]
 *   (ROUNDS=21, BATCH_SIZE=1000, DB_PREFIX=sf_bench_routed_mikro_)
 *
 * The databases, the counting and the rounds are the shared routed harness's
 * (`bench-charts/src/routed.ts`): three databases of one PostgreSQL server play servers a, b and
 * c, each with a `MikroORM` and `shardedIds()`. Every instance is opened with
 * `batchSize: BATCH_SIZE` (MikroORM's default, 300, splits a flush of more rows into several
 * INSERTs).
 *
 * 1. Statements: one `sharded.createAndFlush(Keyed, rows)` of 1000 rows over the 64 shards; the
 *    statements MikroORM sent each server (BEGIN and COMMIT included) are counted by its logger.
 * 2. Overhead: the same write of rows of server a's shards through the router and through a
 *    `MikroORM` on server a's database that is not routed (same source, same entity, a fork of
 *    its `em`, `create` per row and one `flush`).
 */
import { defineEntity, p } from '@mikro-orm/core'
import { MikroORM } from '@mikro-orm/postgresql'
import { ShardHomes } from '@shardflake/core'
import { shardedId, shardedIds, shardedOrms } from '@shardflake/mikro-orm'
import { routedBench, SERVERS } from '../../../bench-charts/src/routed.ts'

const batchSize = Number(process.env.BATCH_SIZE ?? 1000)

const Keyed = defineEntity({
  name: 'Keyed',
  tableName: 'keyed',
  properties: {
    id: shardedId({ shardBy: 'shardKey' }),
    shardKey: p.string(),
  },
})

const bench = await routedBench({ adapter: 'MikroORM 7.2.1', prefix: 'sf_bench_routed_mikro_' })
const { sharding, source, map, urls } = bench

function open(clientUrl: string, onQuery: () => void): Promise<MikroORM> {
  return MikroORM.init({
    clientUrl,
    entities: [Keyed],
    extensions: [shardedIds({ source })],
    batchSize,
    pool: { max: 2 },
    debug: ['query'],
    logger: onQuery,
  })
}

const servers: Record<string, MikroORM> = {}
for (const name of SERVERS) servers[name] = await open(urls[name], bench.countSent(name))
// Server a's database through a MikroORM that is not routed, logging the same way.
const direct = await open(urls.a, () => {})
const homes = await ShardHomes.open({ sharding, servers, directory: map })
const sharded = shardedOrms(homes)
// Connected before counting: MikroORM's first query on a connection checks the database exists.
for (const orm of [...Object.values(servers), direct]) {
  await orm.em.getConnection().execute('SELECT 1')
}

const overhead = await bench.compare({
  router: (size) => sharded.createAndFlush(Keyed, bench.rows(size)),
  direct: async (size) => {
    const em = direct.em.fork()
    for (const row of bench.rows(size)) em.create(Keyed, row)
    await em.flush()
  },
})
const statements = await bench.statements(() =>
  sharded.createAndFlush(Keyed, bench.rows(1000, 'all')),
)
await bench.finish({ batchSize, statements, overhead }, async () => {
  await homes.close()
  for (const orm of [...Object.values(servers), direct]) await orm.close(true)
})
