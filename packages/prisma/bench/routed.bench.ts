/**
 * What routing by `shardedClients()` costs, Prisma 7 (`@prisma/adapter-pg`) on PostgreSQL
 * (after `pnpm --filter @shardflake/prisma build`; generates the test schema's client into the
 * gitignored `generated/pg` when it is missing):
 *
 *   node --import ./test/support/ts-hooks.mjs bench/routed.bench.ts [--json]
 *   [--chart bench/routed.chart.json]   (ROUNDS=21, DB_PREFIX=sf_bench_routed_prisma_,
 *   ERROR_FORMAT: the clients' errorFormat, 'minimal', 'colorless' or 'pretty'; Prisma's default)
 *
 * The databases, the counting and the rounds are the shared routed harness's
 * (`bench-charts/src/routed.ts`): three databases of one PostgreSQL server play servers a, b and
 * c, each with a Prisma client extended with `shardedIds()`. The model is the test schema's
 * `Keyed` (`/// @shardedId(shardBy: shardKey)`).
 *
 * 1. Statements: one `db.keyed.createMany({ data })` of 1000 rows over the 64 shards; the
 *    statements Prisma sent each server are counted by its `query` log events.
 * 2. Overhead: the same `createMany` of rows of server a's shards through the router and on
 *    server a's own client, the one the router sends those rows through (the router's home check
 *    is an extension of its own, so that client is not routed): both sides write through the same
 *    Prisma client, on the same connection, so on the same server process.
 */
import { existsSync } from 'node:fs'
import { PrismaPg } from '@prisma/adapter-pg'
import { type IdSource, ShardHomes } from '@shardflake/core'
import { shardedClients } from '@shardflake/prisma'
import pg from 'pg'
import { routedBench, SERVERS } from '../../../bench-charts/src/routed.ts'
import { blogSchema, prismaGenerate } from '../test/global-setup.ts'

if (!existsSync(new URL('../generated/pg/shardflake', import.meta.url))) {
  await prismaGenerate('pg', await blogSchema('postgresql'))
}
const { PrismaClient } = await import('../generated/pg/client/client.ts')
const { shardedIds } = await import('../generated/pg/shardflake/index.ts')

const ERROR_FORMAT = process.env.ERROR_FORMAT as 'minimal' | 'colorless' | 'pretty' | undefined
function client(pool: pg.Pool, source: IdSource, onQuery: () => void) {
  const made = new PrismaClient({
    adapter: new PrismaPg(pool),
    log: [{ emit: 'event', level: 'query' }],
    // Prisma's default unless set. Every format but 'minimal' makes an Error per query, for its
    // call site.
    ...(ERROR_FORMAT ? { errorFormat: ERROR_FORMAT } : {}),
  })
  made.$on('query', onQuery)
  return made.$extends(shardedIds({ source }))
}
type ServerClient = ReturnType<typeof client>

const bench = await routedBench({
  adapter: 'Prisma 7.10.0 (adapter-pg)',
  prefix: 'sf_bench_routed_prisma_',
})
const { sharding, source, map, urls } = bench

const pools: Record<string, pg.Pool> = {}
const servers: Record<string, ServerClient> = {}
for (const name of SERVERS) {
  pools[name] = new pg.Pool({ connectionString: urls[name], max: 2 })
  servers[name] = client(pools[name], source, bench.countSent(name))
}
const homes = await ShardHomes.open({ sharding, servers, directory: map })
const db = shardedClients({ homes })
// The same write without the router: server a's own client, which the router writes through.
const direct = servers.a!

const overhead = await bench.compare({
  router: (size) => db.keyed.createMany({ data: bench.rows(size) }),
  direct: (size) => direct.keyed.createMany({ data: bench.rows(size) }),
})
const statements = await bench.statements(() =>
  db.keyed.createMany({ data: bench.rows(1000, 'all') }),
)
await bench.finish({ statements, overhead }, async () => {
  await homes.close()
  for (const made of Object.values(servers)) await made.$disconnect()
  for (const pool of Object.values(pools)) await pool.end()
})
