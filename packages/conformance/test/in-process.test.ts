import { defineSharding, InProcessSource, instagram } from '@shardflake/core'
import { asAsync, describeIdSource } from '../src'

const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })

describeIdSource('InProcessSource', {
  sharding,
  create: () => new InProcessSource({ sharding, shards: { from: 0, to: 1999 } }),
  shards: [5, 1341],
  largeBatch: 200_000,
  createWithoutSharding: () => new InProcessSource({ shards: [5] } as never),
})

describeIdSource('InProcessSource behind promises', {
  sharding,
  create: () => asAsync(new InProcessSource({ sharding, shards: [7, 8] })),
  shards: [7, 8],
  foreignShard: 9,
})
