/**
 * The cost of the shardflake hook alone, without an INSERT: `bulkBuild` 1000 instances, then run
 * `beforeBulkCreate` (which gives them their IDs from an in-process source), against
 * `bulkBuild` alone, alternating, medians of 11 rounds after a warm-up.
 *
 *   node src/hook-cost.ts   (after `pnpm build`; PG_URL for the one query of the first write)
 */
import { defineSharding, InProcessSource, instagram } from '@shardflake/core'
import { shardedIds } from '@shardflake/sequelize'
import { Sequelize } from 'sequelize'
import { defineBlog } from './models.ts'

const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
const source = new InProcessSource({ sharding, shards: 'all' })
const sequelize = new Sequelize(process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test', {
  logging: false,
})
shardedIds(sequelize, { source })
const { Post } = defineBlog(sequelize, 'sharded', 'hook_cost')
const rows = () => Array.from({ length: 1000 }, (_, i) => ({ userId: i + 1, title: 'row' }))

/** Sequelize's own hook runner (not in its type declarations): the hooks bulkCreate runs first. */
const runHooks: unknown = Reflect.get(Post, 'runHooks')
if (typeof runHooks !== 'function') throw new Error('This Sequelize has no Model.runHooks')
const beforeBulkCreate = (instances: unknown[]) =>
  runHooks.call(Post, 'beforeBulkCreate', instances, { fields: ['id', 'userId', 'title'] })

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!
const withHook: number[] = []
const buildOnly: number[] = []
for (let round = 0; round <= 11; round++) {
  let hooked = 0
  let built = 0
  // Interleaved call by call, so that load and garbage collection fall on both alike.
  for (let i = 0; i < 20; i++) {
    let started = performance.now()
    await beforeBulkCreate(Post.bulkBuild(rows()))
    hooked += performance.now() - started
    started = performance.now()
    Post.bulkBuild(rows())
    built += performance.now() - started
  }
  if (round === 0) continue // warm-up, and the first write's one query
  withHook.push(hooked / 20)
  buildOnly.push(built / 20)
}
const perRow = withHook.map((value, i) => ((value - buildOnly[i]!) / 1000) * 1000)
console.log(
  `per 1000 rows: bulkBuild ${median(buildOnly).toFixed(2)} ms, bulkBuild + hook ${median(withHook).toFixed(2)} ms; the hook: ${median(perRow).toFixed(2)} µs per row (rounds ${Math.min(...perRow).toFixed(2)}..${Math.max(...perRow).toFixed(2)})`,
)
await sequelize.close()
source.close()
