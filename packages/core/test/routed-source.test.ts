import { describe, expect, it } from 'vitest'
import {
  CancelledError,
  ConfigurationError,
  defineLayout,
  defineSharding,
  type IdSource,
  type InProcessSource,
  InvalidArgumentError,
  instagram,
  MAX_IDS_PER_CALL,
  RoutedSource,
  ShardingMismatchError,
  ShardOutOfRangeError,
} from '../src'
import { openSource, sharding } from './support'

describe('RoutedSource', () => {
  it('over a synchronous and an asynchronous source: a promise for every shard, failures as rejections, the count and signal first', async () => {
    const low = openSource({ shards: { from: 0, to: 999 } })
    const high = openSource({ shards: { from: 1000, to: 1999 } })
    const asyncHigh: IdSource = {
      ...asIdSource(high),
      synchronous: false,
      nextId: async (shard) => high.nextId(shard),
      nextIds: async (shard, count) => high.nextIds(shard, count),
    }
    const source = new RoutedSource(sharding, [
      { from: 0, to: 999, target: low },
      { from: 1000, to: 1999, target: asyncHigh },
    ])
    expect(source.synchronous).toBe(false)
    for (const shard of [5, 1341]) {
      const one = source.nextId(shard)
      expect(one).toBeInstanceOf(Promise)
      expect(sharding.shardOfId(await one)).toBe(shard)
      const many = source.nextIds(shard, 3)
      expect(many).toBeInstanceOf(Promise)
      expect((await many).map((id) => sharding.shardOfId(id))).toEqual([shard, shard, shard])
    }
    // Failures of the synchronous target arrive as rejections, not as throws.
    low.close()
    const refused = source.nextId(5)
    expect(refused).toBeInstanceOf(Promise)
    await expect(refused).rejects.toBeInstanceOf(ConfigurationError)
    // The count is checked before routing, and an aborted signal before asking anyone.
    await expect(async () => source.nextIds(2000, MAX_IDS_PER_CALL + 1)).rejects.toBeInstanceOf(
      InvalidArgumentError,
    )
    await expect(async () =>
      source.nextIds(1341, 2, { signal: AbortSignal.abort() }),
    ).rejects.toBeInstanceOf(CancelledError)
  })

  it('sends each shard to the one source that serves it, and exposes its shardMap', async () => {
    const low = openSource({ shards: { from: 0, to: 999 } })
    const high = openSource({ shards: { from: 1000, to: 1999 } })
    const source = new RoutedSource(sharding, [
      { from: 0, to: 999, target: low },
      { from: 1000, to: 1999, target: high },
    ])
    expect(source.synchronous).toBe(true)
    expect(source.sharding).toBe(sharding)
    expect(source.shardMap.targetFor(1341)).toBe(high)
    expect(source.shardMap.sharding).toBe(sharding)
    expect(sharding.shardOfId(source.nextId(5) as bigint)).toBe(5)
    expect((source.nextIds(1341, 3) as bigint[]).map((id) => sharding.shardOfId(id))).toEqual([
      1341, 1341, 1341,
    ])
    expect(() => source.nextId(2000)).toThrow(ShardOutOfRangeError)
    await source.close()
    expect(() => low.nextId(5)).toThrow(ConfigurationError) // closed with it
  })

  it('refuses two sources for one shard, sources of another sharding, and ticket servers', () => {
    const low = openSource({ shards: { from: 0, to: 999 } })
    const high = openSource({ shards: { from: 1000, to: 1999 } })
    expect(
      () =>
        new RoutedSource(sharding, [
          { from: 0, to: 1000, target: low },
          { from: 1000, to: 1999, target: high },
        ]),
    ).toThrow(InvalidArgumentError)
    const other = defineLayout({
      epoch: '2025-01-01T00:00:00Z',
      timeBits: 41,
      shardBits: 13,
      sequenceBits: 10,
    })
    const stranger = openSource({
      sharding: defineSharding({ layout: other, logicalShards: 2000 }),
      shards: 'all',
    })
    expect(() => new RoutedSource(sharding, [{ from: 0, to: 9, target: stranger }])).toThrow(
      ShardingMismatchError,
    )
    const fewerShards: IdSource = {
      ...asIdSource(low),
      sharding: defineSharding({ layout: instagram, logicalShards: 64 }),
    }
    expect(() => new RoutedSource(sharding, [{ from: 0, to: 9, target: fewerShards }])).toThrow(
      ShardingMismatchError,
    )
    const tickets: IdSource = {
      sharding: undefined,
      synchronous: false,
      nextId: async () => 1n,
      nextIds: async (_shard, count) => Array.from({ length: count }, (_, i) => BigInt(i + 1)),
      close() {},
    }
    expect(() => new RoutedSource(sharding, [{ from: 0, to: 9, target: tickets }])).toThrow(
      ConfigurationError,
    )
  })
})

function asIdSource(source: InProcessSource): IdSource {
  return {
    sharding: source.sharding,
    synchronous: true,
    nextId: (shard) => source.nextId(shard),
    nextIds: (shard, count) => source.nextIds(shard, count),
    close: () => source.close(),
  }
}
