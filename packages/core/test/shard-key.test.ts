import { describe, expect, it, onTestFinished, vi } from 'vitest'
import {
  distinctShards,
  fnv1a32,
  formatShardList,
  hashShard,
  InvalidArgumentError,
  instagram,
  integerShard,
  MAX_KEY_LENGTH,
  MissingShardKeyError,
  parseShardRanges,
  readShardList,
  ShardMap,
  ShardOutOfRangeError,
  shardForKey,
  stringifyIds,
  UnsafeNumberError,
} from '../src'
import { sharding } from './support'

describe('shard keys', () => {
  it("maps Instagram's user 31341 to shard 1341 of 2000, whatever its spelling", () => {
    for (const key of [31341, 31341n, '31341']) expect(integerShard(key, 2000)).toBe(1341)
    expect(shardForKey('31341', 2000)).toBe(1341)
    expect(integerShard(-1n, 2000)).toBe(1999)
  })

  it('hashes strings with 32-bit FNV-1a over UTF-8 (published test vectors)', () => {
    expect(fnv1a32('')).toBe(0x811c9dc5)
    expect(fnv1a32('a')).toBe(0xe40c292c)
    expect(fnv1a32('foobar')).toBe(0xbf9cf968)
    expect(hashShard('foobar', 2000)).toBe(0xbf9cf968 % 2000)
    expect(shardForKey('02134', 2000, 'hash')).toBe(hashShard('02134', 2000))
    expect(shardForKey('02134', 2000)).toBe(2134 % 2000)
  })

  it('refuses a missing key and a bad logicalShards', () => {
    expect(() => shardForKey(null, 2000)).toThrow(MissingShardKeyError)
    expect(() => shardForKey(undefined, 2000)).toThrow(MissingShardKeyError)
    expect(() => integerShard(5, 0)).toThrow(InvalidArgumentError)
  })

  it('refuses an empty or blank string key in both modes, as a missing key', () => {
    for (const key of ['', ' ', '   ', '\t\n', '\u00a0']) {
      expect(() => shardForKey(key, 2000)).toThrow(MissingShardKeyError)
      expect(() => shardForKey(key, 2000, 'hash')).toThrow(MissingShardKeyError)
    }
    // Keys with something besides blanks keep their meaning.
    expect(shardForKey(' 42', 2000)).toBe(hashShard(' 42', 2000))
    expect(shardForKey('a ', 2000)).toBe(hashShard('a ', 2000))
  })
})

describe('the key domain (the same in TS, PostgreSQL and MySQL)', () => {
  it('places every 64-bit integer, signed or unsigned, however it is spelled', () => {
    expect(shardForKey(-5n, 64)).toBe(59)
    expect(shardForKey(-5, 64)).toBe(59)
    expect(shardForKey('-5', 64)).toBe(59)
    expect(shardForKey('18446744073709551615', 64)).toBe(63)
    expect(shardForKey(2n ** 64n - 1n, 64)).toBe(63)
    expect(shardForKey('-9223372036854775808', 2000)).toBe(
      Number(((-(2n ** 63n) % 2000n) + 2000n) % 2000n),
    )
    expect(shardForKey('007', 2000)).toBe(7)
    expect(shardForKey('-0', 2000)).toBe(0)
    expect(shardForKey(`${'0'.repeat(40)}5`, 2000)).toBe(5)
  })

  it('hashes what is not plain digits: a plus sign, white space, non-ASCII digits', () => {
    for (const key of ['+5', ' 5', '5 ', '5.0', '1e3', '-', '--5', '\u0665', '５']) {
      expect(shardForKey(key, 2000)).toBe(hashShard(key, 2000))
    }
  })

  it('places keys within ±(2^53 - 1) as BigInt arithmetic does, as bigint, number and digits', () => {
    const max = BigInt(Number.MAX_SAFE_INTEGER)
    for (const shards of [1, 7, 64, 2000, 8192, 2 ** 31 - 1]) {
      const mod = (key: bigint) =>
        Number(((key % BigInt(shards)) + BigInt(shards)) % BigInt(shards))
      const keys = [
        0n,
        1n,
        -1n,
        31341n,
        -31341n,
        max,
        -max,
        max - 1n,
        -max + 1n,
        max + 1n,
        -max - 1n,
        max + 2n,
        -max - 2n,
        max + 3n,
        -max - 4n,
      ]
      for (let i = 0n; i < 200n; i++)
        keys.push(i * BigInt(shards) - 100n, (max / 200n) * i - max / 3n)
      for (const key of keys) {
        expect(integerShard(key, shards), `${key} of ${shards}`).toBe(mod(key))
        if (key >= -max && key <= max) expect(integerShard(Number(key), shards)).toBe(mod(key))
        expect(integerShard(String(key), shards), `'${key}' of ${shards}`).toBe(mod(key))
        expect(integerShard(`${key < 0n ? '-' : ''}00${key < 0n ? -key : key}`, shards)).toBe(
          mod(key),
        )
      }
    }
    expect(Object.is(integerShard(-2000, 2000), 0)).toBe(true)
    expect(Object.is(integerShard('-0', 2000), 0)).toBe(true)
    expect(integerShard('000000000000007', 64)).toBe(7)
    expect(integerShard('999999999999999', 2000)).toBe(Number(999999999999999n % 2000n))
    expect(integerShard('-99999999999999', 2000)).toBe(Number((-99999999999999n % 2000n) + 2000n))
  })

  it('places integers of any width by key mod logicalShards, in every spelling', () => {
    const mod = (key: bigint) => Number(((key % 2000n) + 2000n) % 2000n)
    for (const key of [
      2n ** 64n,
      -(2n ** 63n) - 1n,
      10n ** 30n + 1341n,
      -(10n ** 300n) - 7n,
      BigInt('123456789012345678901234567890'),
      BigInt(`-${'9'.repeat(1023)}`),
    ]) {
      expect(shardForKey(key, 2000)).toBe(mod(key))
      expect(shardForKey(key.toString(), 2000)).toBe(mod(key))
      expect(integerShard(key, 2000)).toBe(mod(key))
    }
    expect(shardForKey('18446744073709551617', 2000)).toBe(Number(18446744073709551617n % 2000n))
    expect(shardForKey(`${'0'.repeat(1000)}${'1'.repeat(24)}`, 2000)).toBe(
      mod(BigInt('1'.repeat(24))),
    )
    expect(() => shardForKey(2 ** 60, 2000)).toThrow(UnsafeNumberError)
    // A bigint obeys the length bound of text keys (SQL reads keys as text).
    expect(() => shardForKey(10n ** 1024n, 2000)).toThrow(InvalidArgumentError)
    expect(() => shardForKey(-(10n ** 1023n), 2000)).toThrow(InvalidArgumentError)
    expect(shardForKey(10n ** 1023n, 2000)).toBe(0)
    expect(() => shardForKey(1.5, 2000)).toThrow(UnsafeNumberError)
    // In 'hash' mode a wide number is text like any other.
    expect(shardForKey('18446744073709551616', 2000, 'hash')).toBe(
      hashShard('18446744073709551616', 2000),
    )
  })

  it('refuses U+0000, lone surrogates, over-long keys and an unknown mode', () => {
    for (const key of ['a\u0000b', '\u0000', '\ud800', 'x\udc00', '\udc00\ud800']) {
      expect(() => shardForKey(key, 2000)).toThrow(InvalidArgumentError)
      expect(() => shardForKey(key, 2000, 'hash')).toThrow(InvalidArgumentError)
    }
    expect(shardForKey('\ud83d\ude00', 2000)).toBe(hashShard('😀', 2000))
    expect(shardForKey('😀'.repeat(MAX_KEY_LENGTH), 2000)).toBe(
      hashShard('😀'.repeat(MAX_KEY_LENGTH), 2000),
    )
    expect(() => shardForKey('a'.repeat(MAX_KEY_LENGTH + 1), 2000)).toThrow(InvalidArgumentError)
    expect(() => shardForKey('a', 2000, 'upper' as never)).toThrow(InvalidArgumentError)
  })

  it('blank is exactly what String.prototype.trim removes', () => {
    const blank: number[] = []
    const trimmed: number[] = []
    for (let code = 1; code <= 0xffff; code++) {
      if (code >= 0xd800 && code <= 0xdfff) continue
      const char = String.fromCharCode(code)
      if (char.trim() === '') trimmed.push(code)
      try {
        shardForKey(char, 2000)
      } catch (error) {
        if (error instanceof MissingShardKeyError) blank.push(code)
      }
    }
    expect(blank).toEqual(trimmed)
    expect(blank).toHaveLength(25)
  })

  it('does not fold case or trim: normalize keys before they reach shardflake', () => {
    const shards = new Set(['ACME', 'acme', 'acme '].map((key) => shardForKey(key, 2000)))
    expect(shards.size).toBe(3)
  })
})

describe('ShardMap', () => {
  const map = new ShardMap(sharding, [
    { from: 1000, to: 1999, target: 'b' },
    { from: 0, to: 999, target: 'a' },
  ])

  it('routes shards and IDs to their targets', () => {
    expect(map.targetFor(0)).toBe('a')
    expect(map.targetFor(1341)).toBe('b')
    expect(
      map.targetForId(instagram.compose({ timestamp: Date.now(), shard: 999, sequence: 0 })),
    ).toBe('a')
    expect(map.size).toBe(2000)
    expect(map.targets()).toEqual(['a', 'b'])
    expect(map.shards()).toHaveLength(2000)
    expect(() => map.targetFor(2000)).toThrow(ShardOutOfRangeError)
  })

  it('refuses overlapping ranges and shards outside the logical shards', () => {
    expect(
      () =>
        new ShardMap(sharding, [
          { from: 0, to: 10, target: 1 },
          { from: 10, to: 20, target: 2 },
        ]),
    ).toThrow(/overlap/)
    expect(() => ShardMap.single(sharding, 'x', 0, 2000)).toThrow(ShardOutOfRangeError)
    expect(ShardMap.single(sharding, 'x').size).toBe(2000)
  })

  it('parses shard lists into ranges', () => {
    expect(parseShardRanges('0-3,7, 9-9')).toEqual([
      { from: 0, to: 3 },
      { from: 7, to: 7 },
      { from: 9, to: 9 },
    ])
    expect(() => parseShardRanges('3-1')).toThrow(InvalidArgumentError)
    expect(() => parseShardRanges('a')).toThrow(InvalidArgumentError)
  })

  it('reads lists, ranges and strings the same way, checked against the logical shards, and writes them back', () => {
    expect(readShardList([9, 7, 7, 8], sharding)).toEqual([7, 8, 9])
    expect(readShardList({ from: 7, to: 9 }, sharding)).toEqual([7, 8, 9])
    expect(readShardList('7-9', sharding)).toEqual([7, 8, 9])
    expect(readShardList('all', sharding)).toEqual(Array.from({ length: 2000 }, (_, i) => i))
    expect(() => readShardList([], sharding)).toThrow(InvalidArgumentError)
    expect(() => readShardList({ from: 9, to: 7 }, sharding)).toThrow(InvalidArgumentError)
    expect(() => readShardList('1998-2000', sharding)).toThrow(ShardOutOfRangeError)
    expect(() => readShardList([2000], sharding)).toThrow(ShardOutOfRangeError)
    expect(() => readShardList(7 as never, sharding)).toThrow(InvalidArgumentError)
    expect(formatShardList([0, 1, 2, 5, 7, 8])).toBe('0-2,5,7-8')
    expect(readShardList(formatShardList([0, 1, 2, 5, 7, 8]), sharding)).toEqual([0, 1, 2, 5, 7, 8])
    // A write's shards, each once, in the order they first appear.
    expect(distinctShards([7, 3, 7, 7, 0, 3, 1999, 0])).toEqual([7, 3, 0, 1999])
    expect(distinctShards([5])).toEqual([5])
    expect(distinctShards([])).toEqual([])
  })

  it('refuses "0-4000000000" with ShardOutOfRangeError before expanding anything', () => {
    const add = vi.spyOn(Set.prototype, 'add')
    onTestFinished(() => add.mockRestore())
    for (const list of [
      '0-4000000000',
      { from: 0, to: 4_000_000_000 },
      '5,0-4000000000',
    ] as const) {
      expect(() => readShardList(list, sharding)).toThrow(ShardOutOfRangeError)
    }
    expect(add).not.toHaveBeenCalled()
  })
})

describe('JSON', () => {
  it('writes bigints as strings and leaves the rest alone', () => {
    expect(stringifyIds({ id: 2n ** 63n - 1n, n: 1, nested: [3n] })).toBe(
      '{"id":"9223372036854775807","n":1,"nested":["3"]}',
    )
  })
})
