import { describe, expect, it } from 'vitest'
import {
  defineLayout,
  type IdSource,
  InProcessSource,
  InvalidArgumentError,
  instagram,
  LayoutMismatchError,
  RoutedSource,
  ShardOutOfRangeError,
} from '../src'

describe('RoutedSource', () => {
  const low = new InProcessSource({ layout: instagram, shards: { from: 0, to: 999 } })
  const high = new InProcessSource({ layout: instagram, shards: { from: 1000, to: 1999 } })

  it('sends each shard to the one source that serves it', () => {
    const source = new RoutedSource(instagram, [
      { from: 0, to: 999, target: low },
      { from: 1000, to: 1999, target: high },
    ])
    expect(source.synchronous).toBe(true)
    expect(source.logicalShards).toBe(2000)
    expect(instagram.shardOf(source.nextId(5) as bigint)).toBe(5)
    expect((source.nextIds(1341, 3) as bigint[]).map((id) => instagram.shardOf(id))).toEqual([
      1341, 1341, 1341,
    ])
    expect(() => source.nextId(2000)).toThrow(ShardOutOfRangeError)
  })

  it('refuses two sources for one shard, and sources of another layout', () => {
    expect(
      () =>
        new RoutedSource(instagram, [
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
    const stranger = new InProcessSource({ layout: other, shards: 'all' })
    expect(() => new RoutedSource(instagram, [{ from: 0, to: 9, target: stranger }])).toThrow(
      LayoutMismatchError,
    )
    const tickets: IdSource = {
      layout: undefined,
      synchronous: false,
      nextId: async () => 1n,
      nextIds: async (_shard, count) => Array.from({ length: count }, (_, i) => BigInt(i + 1)),
    }
    expect(() => new RoutedSource(instagram, [{ from: 0, to: 9, target: tickets }])).toThrow(
      /without a layout \(a ticket server\)/,
    )
  })
})
