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
import { type IdSource, InProcessSource, PrefetchSource } from '@shardflake/core'
import { shardedIds } from '@shardflake/typeorm'
import { DataSource, type InsertEvent, type ObjectLiteral } from 'typeorm'
import { userIds } from './benchmark.ts'
import { ShardedPost } from './entities.ts'
import { shardingOf } from './setup.ts'

const url = new URL(process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test')
const sharding = shardingOf({ logicalShards: 16 })
const users = userIds(1000)

const inProcess = () => new InProcessSource({ sharding, shards: 'all' })
const asAsync = (inner: IdSource): IdSource => ({
  sharding: inner.sharding,
  synchronous: false,
  nextId: async (shard) => inner.nextId(shard),
  nextIds: async (shard, count) => inner.nextIds(shard, count),
  close: () => inner.close(),
})
const sources: [string, () => IdSource][] = [
  ['InProcessSource', inProcess],
  ['PrefetchSource (buffer hits)', () => new PrefetchSource(asAsync(inProcess()), { size: 1000 })],
]

/** An initialized DataSource for the posts table, with shardflake when a source is given. */
async function open(source?: IdSource) {
  const dataSource = new DataSource({
    type: 'postgres',
    url: url.toString(),
    entities: [ShardedPost],
  })
  const subscriber = source ? shardedIds(dataSource, { source }) : undefined
  await dataSource.initialize()
  return { dataSource, subscriber, metadata: dataSource.getMetadata(ShardedPost) }
}

/** µs per call of `rows` rows, the median of 5 timings of `calls` calls. */
async function perCall(
  { dataSource, subscriber, metadata }: Awaited<ReturnType<typeof open>>,
  rows: number,
  calls: number,
) {
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
  const bare = await open()
  const empty = await perCall(bare, rows, calls)
  await bare.dataSource.destroy()
  console.log(`| (no hook: the loop alone) | ${rows} | ${empty.toFixed(2)} | |`)
  for (const [name, make] of sources) {
    const source = make()
    const opened = await open(source)
    await perCall(opened, rows, calls) // warm-up
    const cost = (await perCall(opened, rows, calls)) - empty
    console.log(`| ${name} | ${rows} | ${cost.toFixed(2)} | ${(cost / rows).toFixed(3)} |`)
    await opened.dataSource.destroy()
    await source.close()
  }
}
