import { describe, expect, it } from 'vitest'
import {
  ConfigurationError,
  checkServedShard,
  contextQueryRule,
  defineSharding,
  InvalidArgumentError,
  instagram,
  OpenedPools,
  ShardingMismatchError,
  ShardMap,
  ShardOutOfRangeError,
  toShardMap,
} from '../src/index'

const sharding = defineSharding({ layout: instagram, logicalShards: 16 })

describe('toShardMap', () => {
  it('reads one database (all shards, a range, a list), ranges and a ShardMap', () => {
    expect(toShardMap(sharding, 'url-a', undefined).targetFor(15)).toBe('url-a')
    const range = toShardMap(sharding, 'url-a', { from: 2, to: 4 })
    expect([range.has(1), range.has(2), range.has(4), range.has(5)]).toEqual([
      false,
      true,
      true,
      false,
    ])
    const list = toShardMap(sharding, 'url-a', '1-2,7')
    expect([1, 2, 3, 7].map((shard) => list.has(shard))).toEqual([true, true, false, true])
    const ranges = toShardMap(
      sharding,
      [
        { from: 0, to: 7, target: 'a' },
        { from: 8, to: 15, target: 'b' },
      ],
      undefined,
    )
    expect([ranges.targetFor(7), ranges.targetFor(8)]).toEqual(['a', 'b'])
    const map = ShardMap.single(sharding, 'a')
    expect(toShardMap(sharding, map, undefined)).toBe(map)
  })

  it('refuses a ShardMap of another sharding, an empty list and no databases', () => {
    const other = ShardMap.single(defineSharding({ layout: instagram, logicalShards: 32 }), 'a')
    expect(() => toShardMap(sharding, other, undefined)).toThrow(ShardingMismatchError)
    expect(() => toShardMap(sharding, 'a', [])).toThrow(InvalidArgumentError)
    expect(() => toShardMap(sharding, undefined as never, undefined)).toThrow(ConfigurationError)
  })
})

describe('checkServedShard and contextQueryRule', () => {
  it('refuses shards outside the logical shards or the map; reads the option per shard', () => {
    const map = toShardMap(sharding, 'a', { from: 0, to: 3 })
    expect(() => checkServedShard(map, 3)).not.toThrow()
    expect(() => checkServedShard(map, 4)).toThrow(ShardOutOfRangeError)
    expect(() => checkServedShard(map, 16)).toThrow(ShardOutOfRangeError)
    expect(contextQueryRule(undefined)(1)).toBe(false)
    expect(contextQueryRule(true)(1)).toBe(true)
    expect([1, 2].map(contextQueryRule((shard) => shard === 2))).toEqual([false, true])
  })
})

describe('OpenedPools', () => {
  it('opens one pool per URL and ends exactly those on close, passing over failures', async () => {
    const ended: string[] = []
    const opened: string[] = []
    const pools = new OpenedPools(async (url: string) => {
      opened.push(url)
      if (url === 'bad') throw new Error('refused')
      return { end: async () => void ended.push(url) }
    })
    const first = await pools.get('a')
    expect(await pools.get('a')).toBe(first)
    await pools.get('b')
    await expect(pools.get('bad')).rejects.toThrow('refused')
    await pools.close()
    expect(opened).toEqual(['a', 'b', 'bad'])
    expect(ended.sort()).toEqual(['a', 'b'])
  })
})
