/**
 * What routing by `shardedDataSources()` costs, TypeORM 1 on PostgreSQL (after
 * `pnpm --filter @shardflake/typeorm build`):
 *
 *   node bench/routed.bench.ts [--json] [--chart bench/routed.chart.json]
 *   (ROUNDS=21, DB_PREFIX=sf_bench_routed_typeorm_)
 *
 * The databases, the counting and the rounds are the shared routed harness's
 * (`bench-charts/src/routed.ts`): three databases of one PostgreSQL server play servers a, b and
 * c, each with a `DataSource` and `shardedIds()`.
 *
 * 1. Statements: one `sharded.save(Keyed, rows)` of 1000 rows over the 64 shards; the statements
 *    TypeORM sent each server (BEGIN and COMMIT included) are counted by its logger.
 * 2. Overhead: the same save of rows of server a's shards through the router and through a
 *    `DataSource` that is not routed (same source, same entity) over the pool of the router's
 *    server a: both sides write on the same connection, so on the same server process.
 */
import { ShardHomes } from '@shardflake/core'
import { shardedDataSources, shardedIdColumn, shardedIds } from '@shardflake/typeorm'
import pg from 'pg'
import { DataSource, EntitySchema, type Logger } from 'typeorm'
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver.js'
import { routedBench, SERVERS } from '../../../bench-charts/src/routed.ts'

interface Keyed {
  id?: string
  shardKey: string
}
const Keyed = new EntitySchema<Keyed>({
  name: 'Keyed',
  tableName: 'keyed',
  columns: {
    id: shardedIdColumn<Keyed>({ shardBy: 'shardKey' }),
    shardKey: { type: 'varchar', name: 'shard_key' },
  },
})

/** Counts the statements TypeORM sends. */
function logger(onQuery: () => void): Logger {
  const nothing = () => {}
  return {
    logQuery: onQuery,
    logQueryError: nothing,
    logQuerySlow: nothing,
    logSchemaBuild: nothing,
    logMigration: nothing,
    log: nothing,
  }
}

const bench = await routedBench({ adapter: 'TypeORM 1.1.1', prefix: 'sf_bench_routed_typeorm_' })
const { sharding, source, map, urls } = bench

/** A DataSource of `url`: with `pool`, over that pool (TypeORM's `driver` builds no other). */
async function open(url: string, onQuery: () => void, pool?: pg.Pool): Promise<DataSource> {
  const dataSource = new DataSource({
    type: 'postgres',
    url,
    entities: [Keyed],
    extra: { max: 2 },
    logger: logger(onQuery),
    logging: true,
    // `new Pool()` returns `pool` (a constructor returning an object yields that object).
    ...(pool && {
      driver: {
        ...pg,
        Pool: function SharedPool() {
          return pool
        },
      },
    }),
  })
  shardedIds(dataSource, { source })
  return dataSource.initialize()
}

const servers: Record<string, DataSource> = {}
for (const name of SERVERS) servers[name] = await open(urls[name], bench.countSent(name))
// Server a's pool through a DataSource that is not routed, logging the same way.
const direct = await open(urls.a, () => {}, (servers.a!.driver as PostgresDriver).master)
const homes = await ShardHomes.open({ sharding, servers, directory: map })
const sharded = shardedDataSources(homes)

const overhead = await bench.compare({
  router: (size) => sharded.save(Keyed, bench.rows(size)),
  direct: (size) => direct.manager.save(Keyed, bench.rows(size)),
})
const statements = await bench.statements(() => sharded.save(Keyed, bench.rows(1000, 'all')))
await bench.finish({ statements, overhead }, async () => {
  await homes.close()
  // Server a's DataSource ends the pool the direct one shares.
  for (const dataSource of Object.values(servers)) await dataSource.destroy()
})
