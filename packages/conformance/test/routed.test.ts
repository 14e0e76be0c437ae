import { defineSharding, InProcessSource, instagram, RoutedSource } from '@shardflake/core'
import { asAsync, describeIdSource } from '../src'

const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })

/** The in-process source of shards 0-999, made once, when the suite starts. */
let lowShards: InProcessSource | undefined
const low = () => {
  lowShards ??= new InProcessSource({ sharding, shards: { from: 0, to: 999 } })
  return lowShards
}

describeIdSource('RoutedSource over a synchronous and an asynchronous source', {
  sharding,
  create: () =>
    new RoutedSource(sharding, [
      { from: 0, to: 999, target: low() },
      {
        from: 1000,
        to: 1999,
        target: asAsync(new InProcessSource({ sharding, shards: { from: 1000, to: 1999 } })),
      },
    ]),
  // One shard on each target: an asynchronous RoutedSource answers with a promise for both.
  shards: [5, 1341],
  createWithOtherSharding: () =>
    new RoutedSource(defineSharding({ layout: instagram, logicalShards: 64 }), [
      { from: 0, to: 63, target: low() },
    ]),
})
