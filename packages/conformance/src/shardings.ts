import {
  defineLayout,
  defineSharding,
  instagram,
  type Layout,
  type Sharding,
} from '@shardflake/core'

/**
 * The sharding the suites use unless told otherwise: the Instagram layout over 64 logical
 * shards. Sources and adapters under test get this one object.
 */
export function testSharding(logicalShards = 64, layout: Layout = instagram): Sharding {
  return defineSharding({ layout, logicalShards })
}

/**
 * A sharding for leased sources, whose layout has worker bits (41 time, 13 shard, `workerBits`,
 * the rest sequence; epoch 2025-01-01), over 64 logical shards. Two worker bits (four workers)
 * make "every worker held" easy to reach in a test.
 */
export function testLeasedSharding(workerBits = 2): Sharding {
  const layout = defineLayout({
    name: 'leased',
    epoch: '2025-01-01T00:00:00Z',
    timeBits: 41,
    shardBits: 13,
    workerBits,
    sequenceBits: 10 - workerBits,
  })
  return defineSharding({ layout, logicalShards: 64 })
}
