import { describe, expect, it } from 'vitest'
import {
  CancelledError,
  defineSharding,
  hashShard,
  InProcessSource,
  InvalidArgumentError,
  instagram,
  MAX_IDS_PER_CALL,
  RoutedSource,
} from '../src'

const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })

describe('bounds checked before any work', () => {
  it('places integer keys wider than 64 bits by their value, as digit strings or bigints; hashes them on request', () => {
    const wide = 10n ** 30n + 1341n
    expect(sharding.shardForKey(wide.toString())).toBe(1341)
    expect(sharding.shardForKey(wide)).toBe(1341)
    expect(sharding.shardForKey(`-${wide}`)).toBe(2000 - 1341)
    expect(sharding.shardForKey('9'.repeat(1024))).toBe(Number(BigInt('9'.repeat(1024)) % 2000n))
    expect(sharding.shardForKey(wide.toString(), 'hash')).toBe(
      hashShard(wide.toString(), sharding.logicalShards),
    )
    expect(sharding.shardForKey((2n ** 64n - 1n).toString())).toBe(Number((2n ** 64n - 1n) % 2000n))
  })

  it('refuses a count beyond the bound and a cancelled call on a routed source, before routing', () => {
    const inner = new InProcessSource({ sharding, shards: { from: 0, to: 9 } })
    try {
      const routed = new RoutedSource(sharding, [{ from: 0, to: 9, target: inner }])
      expect(() => routed.nextIds(1999, MAX_IDS_PER_CALL + 1)).toThrow(InvalidArgumentError)
      const signal = AbortSignal.abort()
      expect(() => routed.nextIds(1, 5, { signal })).toThrow(CancelledError)
      expect(routed.nextIds(1, 5)).toHaveLength(5)
    } finally {
      inner.close()
    }
  })
})
