/**
 * The client CPU `shardedKysely()` adds to an INSERT, without a database: three Kysely instances
 * on a driver that sends nothing (Kysely's `DummyDriver`, PostgreSQL's compiler), the router
 * against server a's instance, the same rows (shards 0-20, all on a). Each round times N inserts
 * per side as D-R-R-D or R-D-D-R (alternating) after a warm-up; prints the median CPU µs per
 * insert of each side and router ÷ direct per round: median (smallest..largest round).
 *
 *   node bench/routed-cpu.ts      (after pnpm build; SIZE=1 rows per insert, N=20000, ROUNDS=7)
 */
import { defineSharding, InProcessSource, instagram, ShardHomes, ShardMap } from '@shardflake/core'
import { type ShardedId, shardedIds, shardedKysely } from '@shardflake/kysely'
import {
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
} from 'kysely'

interface Database {
  keyed: { id: ShardedId; shard_key: string }
}

const size = Number(process.env.SIZE ?? 1)
const n = Number(process.env.N ?? (size === 1 ? 20000 : 100))
const rounds = Number(process.env.ROUNDS ?? 7)

const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
const source = new InProcessSource({ sharding, shards: 'all' })
const map = new ShardMap(sharding, [
  { from: 0, to: 20, target: 'a' },
  { from: 21, to: 41, target: 'b' },
  { from: 42, to: 63, target: 'c' },
])
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

/** CPU µs (user + system) per call of `run`, over `times` calls. */
async function cpu(run: () => Promise<unknown>, times: number): Promise<number> {
  const start = process.cpuUsage()
  for (let i = 0; i < times; i++) await run()
  const used = process.cpuUsage(start)
  return (used.user + used.system) / times
}

const median = (values: number[]) => {
  const sorted = [...values].sort((x, y) => x - y)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

for (let i = 0; i < 2; i++) {
  await cpu(router, n / 4)
  await cpu(direct, n / 4)
}
const r: number[] = []
const d: number[] = []
const ratios: number[] = []
for (let round = 0; round < rounds; round++) {
  const [first, second] = round % 2 ? [router, direct] : [direct, router]
  const t = [await cpu(first, n), await cpu(second, n), await cpu(second, n), await cpu(first, n)]
  const [routerUs, directUs] =
    first === router
      ? [(t[0]! + t[3]!) / 2, (t[1]! + t[2]!) / 2]
      : [(t[1]! + t[2]!) / 2, (t[0]! + t[3]!) / 2]
  r.push(routerUs)
  d.push(directUs)
  ratios.push(routerUs / directUs)
}
const f = (value: number) => value.toFixed(2)
console.log(
  `${size}-row inserts, ${rounds} rounds of 4 x ${n}: CPU µs per insert, router ${f(median(r))}, direct ${f(median(d))}; router ÷ direct ${f(median(ratios))} (${f(Math.min(...ratios))}..${f(Math.max(...ratios))})`,
)
await homes.close()
await source.close()
