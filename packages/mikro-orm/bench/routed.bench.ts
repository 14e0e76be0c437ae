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
 *    `MikroORM` that is not routed (same source, same entity, a fork of its `em`, `create` per
 *    row and one `flush`) over the Kysely client, so the pool, of the router's server a: both
 *    sides write on the same connection, so on the same server process.
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

/** The Kysely client of a MikroORM 7 connection (it holds the pool). */
type Client = ReturnType<ReturnType<MikroORM['em']['getConnection']>['getClient']>

/** A MikroORM of `clientUrl`: with `client`, over that Kysely client (its pool). */
function open(clientUrl: string, onQuery: () => void, client?: Client): Promise<MikroORM> {
  return MikroORM.init({
    clientUrl,
    ...(client && { driverOptions: client }),
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
// Server a's pool through a MikroORM that is not routed, logging the same way.
const direct = await open(urls.a, () => {}, servers.a!.em.getConnection().getClient())
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
  // Server a's MikroORM destroys the client the direct one shares.
  for (const orm of Object.values(servers)) await orm.close(true)
})
