import { InProcessSource, instagram } from '@shardflake/core'
import { describeIdSource } from '../src'

describeIdSource('InProcessSource', {
  create: () => new InProcessSource({ layout: instagram, shards: { from: 0, to: 1999 } }),
  shards: [5, 1341],
  foreignShard: 2000,
  largeBatch: 200_000,
})
