/**
 * What the `@ShardedId` subscriber itself costs per save(), apart from the database: its
 * `beforeInsert` hook called the way TypeORM calls it (one event per row, all rows of a call in one
 * synchronous loop, then awaited together), on a real `DataSource`'s metadata, with no INSERT.
 *
 *   node dist/hook-cost.js                 # 1 row and 1000 rows per call, 20,000 calls / 200 calls
 *
 * Sources: the in-process source, and the same behind promises with a `PrefetchSource` (what a
 * database source with a prefetch buffer costs when the buffer holds the IDs).
 */
import 'reflect-metadata'
import { type IdSource, InProcessSource, instagram, PrefetchSource } from '@shardflake/core'
import { ShardedIdSubscriber } from '@shardflake/typeorm'
import { DataSource, type InsertEvent, type ObjectLiteral } from 'typeorm'
import { ShardedPost } from './entities.ts'

const url = new URL(process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test')
const dataSource = new DataSource({
  type: 'postgres',
  url: url.toString(),
  entities: [ShardedPost],
})
await dataSource.initialize()
const metadata = dataSource.getMetadata(ShardedPost)
const logicalShards = 16
const users = Array.from({ length: 1000 }, (_, i) => String(1801 + i * 7919))

const inProcess = () => new InProcessSource({ layout: instagram, shards: 'all', logicalShards })
const asAsync = (inner: IdSource): IdSource => ({
  layout: inner.layout,
  logicalShards: inner.logicalShards,
  synchronous: false,
  nextId: async (shard) => inner.nextId(shard),
  nextIds: async (shard, count) => inner.nextIds(shard, count),
})
const sources: [string, () => IdSource][] = [
  ['InProcessSource', inProcess],
  ['PrefetchSource (buffer hits)', () => new PrefetchSource(asAsync(inProcess()), { size: 1000 })],
]

/** µs per call of `rows` rows, the median of 5 timings of `calls` calls. */
async function perCall(subscriber: ShardedIdSubscriber | undefined, rows: number, calls: number) {
  const timings: number[] = []
  let user = 0
  for (let run = 0; run < 5; run++) {
    const started = performance.now()
    for (let call = 0; call < calls; call++) {
      const pending: Promise<unknown>[] = []
      for (let r = 0; r < rows; r++) {
        const entity = { userId: users[user++ % users.length], title: 'x' } as ObjectLiteral
        const event = { entity, metadata, connection: dataSource, manager: dataSource.manager }
        const result = subscriber?.beforeInsert(event as InsertEvent<ObjectLiteral>)
        if (result instanceof Promise) pending.push(result)
      }
      await Promise.all(pending)
    }
    timings.push(((performance.now() - started) * 1000) / calls)
  }
  return timings.sort((a, b) => a - b)[2]!
}

console.log('| source | rows per call | hook µs per call | µs per row |')
console.log('|---|---:|---:|---:|')
for (const rows of [1, 1000]) {
  const calls = rows === 1 ? 20_000 : 200
  const empty = await perCall(undefined, rows, calls)
  console.log(`| (no hook: the loop alone) | ${rows} | ${empty.toFixed(2)} | |`)
  for (const [name, make] of sources) {
    const subscriber = new ShardedIdSubscriber({ source: make() })
    await perCall(subscriber, rows, calls) // warm-up
    const cost = (await perCall(subscriber, rows, calls)) - empty
    console.log(`| ${name} | ${rows} | ${cost.toFixed(2)} | ${(cost / rows).toFixed(3)} |`)
  }
}
await dataSource.destroy()
