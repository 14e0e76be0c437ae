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
 *    `DataSource` on server a's database that is not routed (same source, same entity).
 */
import { ShardHomes } from '@shardflake/core'
import { shardedDataSources, shardedIdColumn, shardedIds } from '@shardflake/typeorm'
import { DataSource, EntitySchema, type Logger } from 'typeorm'
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

async function open(url: string, onQuery: () => void): Promise<DataSource> {
  const dataSource = new DataSource({
    type: 'postgres',
    url,
    entities: [Keyed],
    extra: { max: 2 },
    logger: logger(onQuery),
    logging: true,
  })
  shardedIds(dataSource, { source })
  return dataSource.initialize()
}

const servers: Record<string, DataSource> = {}
for (const name of SERVERS) servers[name] = await open(urls[name], bench.countSent(name))
// Server a's database through a DataSource that is not routed, logging the same way.
const direct = await open(urls.a, () => {})
const homes = await ShardHomes.open({ sharding, servers, directory: map })
const sharded = shardedDataSources(homes)

const overhead = await bench.compare({
  router: (size) => sharded.save(Keyed, bench.rows(size)),
  direct: (size) => direct.manager.save(Keyed, bench.rows(size)),
})
const statements = await bench.statements(() => sharded.save(Keyed, bench.rows(1000, 'all')))
await bench.finish({ statements, overhead }, async () => {
  await homes.close()
  for (const dataSource of [...Object.values(servers), direct]) await dataSource.destroy()
})
