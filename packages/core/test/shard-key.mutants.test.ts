import { describe, expect, it } from 'vitest'
import { defineSharding, fnv1a32, hashShard, instagram, shardForKey } from '../src'

/**
 * Golden key → shard vectors for keys outside ASCII, computed independently of this code
 * (32-bit FNV-1a over the key's UTF-8 bytes). Any other language that follows the documented
 * hash must land these keys on these shards; a hash over UTF-16 code units (`charCodeAt`)
 * agrees on ASCII and differs on every key here.
 */
const VECTORS: readonly (readonly [key: string, hash: number, of2000: number, of64: number])[] = [
  ['é', 0x1e9de8c1, 1217, 1],
  ['ß', 0x309e0517, 359, 23],
  ['café', 0xa82b5049, 889, 9],
  ['straße', 0x2626f818, 88, 24],
  ['müller', 0x52fa575c, 76, 28],
  ['Zoë@example.com', 0x5f8482e1, 1777, 33],
  ['日本語', 0x805f5ce7, 1351, 39],
  // Outside the Basic Multilingual Plane: two UTF-16 code units, four UTF-8 bytes.
  ['🦄', 0x0c130832, 1874, 50],
]

describe('shard keys outside ASCII', () => {
  it.each(VECTORS)(
    'hashes %j over its UTF-8 bytes and lands on its golden shard',
    (key, hash, of2000, of64) => {
      expect(fnv1a32(key)).toBe(hash)
      expect(hashShard(key, 2000)).toBe(of2000)
      expect(shardForKey(key, 2000)).toBe(of2000)
      expect(shardForKey(key, 64, 'hash')).toBe(of64)
    },
  )

  it('places a non-ASCII key through a sharding on its golden shard', () => {
    const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
    for (const [key, , of2000] of VECTORS) expect(sharding.shardForKey(key)).toBe(of2000)
  })

  it('hashes a key as given, never normalized: the NFC and NFD spellings of é differ', () => {
    // Precomposed (NFC) and 'e' + combining acute (NFD) are different bytes.
    expect(fnv1a32('\u00e9')).toBe(0x1e9de8c1)
    expect(fnv1a32('e\u0301')).toBe(0xfa9bc71f)
  })
})
