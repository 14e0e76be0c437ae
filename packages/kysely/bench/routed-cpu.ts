/**
 * The client CPU `shardedKysely()` adds to an INSERT, without a database: three Kysely instances
 * on a driver that sends nothing (Kysely's `DummyDriver`, PostgreSQL's compiler), the router
 * against server a's instance, the same rows (shards 0-20, all on a), timed in the shared rounds
 * of `bench-charts/src/routed-cpu.ts`.
 *
 *   node bench/routed-cpu.ts      (after pnpm build; SIZE=1 rows per insert, N=20000, ROUNDS=7)
 */
import { ShardHomes } from '@shardflake/core'
import { type ShardedId, shardedIds, shardedKysely } from '@shardflake/kysely'
import {
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
} from 'kysely'
import { compareCpu, cpuSetup } from '../../../bench-charts/src/routed-cpu.ts'

interface Database {
  keyed: { id: ShardedId; shard_key: string }
}

const { size, n, rounds, sharding, source, map } = cpuSetup()
const ids = shardedIds<Database>({ source, tables: { keyed: { shardBy: 'shard_key' } } })
const servers: Record<string, Kysely<Database>> = {}
for (const name of ['a', 'b', 'c']) {
  servers[name] = new Kysely<Database>({
    dialect: ids.dialect({
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: (db) => new PostgresIntrospector(db),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    }),
    plugins: [ids],
  })
}
const homes = await ShardHomes.open({ sharding, servers, directory: map })
const sharded = shardedKysely(homes)
const rows = () => Array.from({ length: size }, (_, i) => ({ shard_key: String(i % 21) }))
const router = () => sharded.insertInto('keyed').values(rows()).execute()
const direct = () => servers.a!.insertInto('keyed').values(rows()).execute()

await compareCpu({ label: `${size}-row inserts`, router, direct, n, rounds })
await homes.close()
await source.close()
