import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  defineSharding,
  fnv1a32,
  hashShard,
  instagram,
  integerShard,
  type StringKeyMode,
  shardForKey,
} from '../src'

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

/** The hash as documented, over the bytes `TextEncoder` gives (a lone surrogate as U+FFFD). */
function fnvOfBytes(text: string): number {
  let hash = 0x811c9dc5
  for (const byte of new TextEncoder().encode(text)) hash = Math.imul(hash ^ byte, 0x01000193)
  return hash >>> 0
}

describe('fnv1a32 over any string', () => {
  it('equals FNV-1a over the UTF-8 bytes TextEncoder gives, whatever the code units', () => {
    // Every UTF-16 code unit, lone surrogates and pairs included, and whole code points.
    const text = fc.oneof(
      fc.string({ unit: 'binary' }),
      fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((u) => String.fromCharCode(u)) }),
    )
    fc.assert(
      fc.property(text, (key) => fnv1a32(key) === fnvOfBytes(key)),
      { numRuns: 5000 },
    )
  })

  it.each([
    ['a lone high surrogate at the end', 'ab\ud83e'],
    ['a lone low surrogate', '\udc00x'],
    ['two high surrogates', '\ud800\ud800\udc00'],
    ['the last BMP code unit', '\uffff'],
    ['U+0800, the first three-byte code point', '\u0800'],
    ['U+07FF, the last two-byte code point', '\u07ff'],
    ['U+10FFFF', '\udbff\udfff'],
  ])('hashes %s as TextEncoder encodes it', (_, key) => {
    expect(fnv1a32(key)).toBe(fnvOfBytes(key))
  })
})

describe('string keys, any of them, in either mode', () => {
  /** A value, or the class of the error thrown. */
  const outcome = (place: () => number): number | string => {
    try {
      return place()
    } catch (error) {
      return (error as Error).constructor.name
    }
  }
  const keys = fc.oneof(
    fc.constantFrom(
      '',
      ' ',
      '-',
      '-0',
      '007',
      '+5',
      '5.0',
      '\u0000',
      '\ud800',
      'acme',
      'x'.repeat(65),
    ),
    fc.stringMatching(/^-?[0-9]{1,20}$/),
    fc.string({ maxLength: 70 }),
  )

  it('reads a digit string as integerShard does, and hashes any other key, or refuses it typed', () => {
    fc.assert(
      fc.property(keys, fc.constantFrom('auto', 'hash'), (key, mode) => {
        const got = outcome(() => shardForKey(key, 2000, mode as StringKeyMode))
        const digits = mode === 'auto' && /^-?[0-9]+$/.test(key)
        if (typeof got === 'string') {
          expect(digits).toBe(false)
          expect(['MissingShardKeyError', 'InvalidArgumentError']).toContain(got)
        } else {
          expect(got).toBe(digits ? integerShard(key, 2000) : hashShard(key, 2000))
        }
      }),
      { numRuns: 3000 },
    )
  })

  it('reads short digit strings as integers, with or without a minus', () => {
    expect(shardForKey('-7', 64)).toBe(57)
    expect(shardForKey('-0', 64)).toBe(0)
    expect(shardForKey('0000000000000063', 64)).toBe(63) // 16 characters: read as a bigint
    expect(shardForKey('999999999999999', 64)).toBe(999999999999999 % 64)
    expect(shardForKey('-', 64)).toBe(hashShard('-', 64))
    expect(shardForKey('9999999999999999', 64)).toBe(Number(9999999999999999n % 64n)) // past 2^53
    expect(shardForKey('1-2', 64)).toBe(hashShard('1-2', 64))
    expect(shardForKey('1/2', 64)).toBe(hashShard('1/2', 64))
    expect(shardForKey('1:2', 64)).toBe(hashShard('1:2', 64))
    expect(shardForKey('12a', 64)).toBe(hashShard('12a', 64))
    expect(() => shardForKey('', 64)).toThrow(/empty string/)
  })
})
