/**
 * The client CPU `shardedDatabases()` adds to an INSERT, without a database: three Drizzle
 * databases (node-postgres) on a client that sends nothing and answers every query with no rows,
 * the router against a Drizzle database that is not routed over server a's client, the same rows
 * (shards 0-20, all on a), timed in the shared rounds of `bench-charts/src/routed-cpu.ts`.
 *
 *   node bench/routed-cpu.ts      (after pnpm build; SIZE=1 rows per insert, N=20000, ROUNDS=7)
 */
import { ShardHomes } from '@shardflake/core'
import { shardedDatabases, shardedId, shardedIds } from '@shardflake/drizzle'
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres'
import { bigint, pgTable, text } from 'drizzle-orm/pg-core'
import pg from 'pg'
import { compareCpu, cpuSetup } from '../../../bench-charts/src/routed-cpu.ts'

const keyed = pgTable('keyed', {
  id: shardedId(bigint({ mode: 'bigint' }), { shardBy: 'shardKey' }).primaryKey(),
  shardKey: text('shard_key').notNull(),
})

/**
 * A node-postgres client that sends nothing (never connected): every query answers at once, with
 * no rows.
 */
function silentClient(): pg.Client {
  const client = new pg.Client()
  const result = { command: 'INSERT', rowCount: 0, rows: [], fields: [] }
  Object.defineProperty(client, 'query', { value: async () => result })
  return client
}

const { size, n, rounds, sharding, source, map } = cpuSetup()
const clientOfA = silentClient()
const servers: Record<string, NodePgDatabase> = {
  a: drizzle({ client: clientOfA }),
  b: drizzle({ client: silentClient() }),
  c: drizzle({ client: silentClient() }),
}
// Server a's client through a Drizzle database that is not routed.
const direct = drizzle({ client: clientOfA })
const ids = shardedIds(servers.a!, { source, schema: { keyed } })
const homes = await ShardHomes.open({ sharding, servers, directory: map })
const sharded = shardedDatabases(homes, ids)
const rows = () => Array.from({ length: size }, (_, i) => ({ shardKey: String(i % 21) }))
const router = () => sharded.insert(keyed, rows())
const directly = async () => direct.insert(keyed).values(await ids.assign(keyed, rows()))

await compareCpu({ label: `${size}-row inserts`, router, direct: directly, n, rounds })
ids.close()
await homes.close()
await source.close()
