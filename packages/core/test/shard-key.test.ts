import { describe, expect, it } from 'vitest'
import {
  fnv1a32,
  formatShardList,
  hashShard,
  InvalidArgumentError,
  instagram,
  integerShard,
  MissingShardKeyError,
  parseShardList,
  readShardList,
  resolveShard,
  ShardMap,
  ShardOutOfRangeError,
  shardForKey,
  stringifyIds,
} from '../src'

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

  it('resolves the three kinds of rule, and refuses missing keys and foreign shards', () => {
    const options = { layout: instagram, logicalShards: 2000, entityName: 'Post' }
    expect(resolveShard({ shardBy: 'userId' }, { userId: '31341' }, options)).toBe(1341)
    expect(
      resolveShard({ shardBy: (p: { email: string }) => p.email }, { email: 'a@b.c' }, options),
    ).toBe(hashShard('a@b.c', 2000))
    const parent = instagram.compose({ timestamp: Date.now(), shard: 77, sequence: 1 })
    expect(resolveShard({ sameShardAs: 'postId' }, { postId: parent.toString() }, options)).toBe(77)
    expect(resolveShard({ shard: 12 }, {}, options)).toBe(12)
    expect(() => resolveShard({ shardBy: 'userId' }, { userId: null }, options)).toThrow(
      MissingShardKeyError,
    )
    const draft: { userId?: string; postId?: string } = {}
    expect(() => resolveShard({ shardBy: 'userId' }, draft, options)).toThrow(
      /shard key of Post \(field 'userId'\)/,
    )
    expect(() => resolveShard({ sameShardAs: 'postId' }, draft, options)).toThrow(
      MissingShardKeyError,
    )
    expect(() => resolveShard({ shard: 2500 }, {}, options)).toThrow(ShardOutOfRangeError)
    expect(() => integerShard(5, 0)).toThrow(InvalidArgumentError)
  })
})

describe('ShardMap', () => {
  const map = new ShardMap(instagram, [
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

  it('refuses overlapping ranges and shards outside the layout', () => {
    expect(
      () =>
        new ShardMap(instagram, [
          { from: 0, to: 10, target: 1 },
          { from: 10, to: 20, target: 2 },
        ]),
    ).toThrow(/overlap/)
    expect(() => ShardMap.single(instagram, 'x', 0, 8192)).toThrow(ShardOutOfRangeError)
  })

  it('parses shard lists', () => {
    expect(parseShardList('0-3,7, 9-9')).toEqual([0, 1, 2, 3, 7, 9])
    expect(() => parseShardList('3-1')).toThrow(InvalidArgumentError)
    expect(() => parseShardList('a')).toThrow(InvalidArgumentError)
  })

  it('reads lists, ranges and strings the same way, checked against the layout, and writes them back', () => {
    expect(readShardList([9, 7, 7, 8], instagram)).toEqual([7, 8, 9])
    expect(readShardList({ from: 7, to: 9 }, instagram)).toEqual([7, 8, 9])
    expect(readShardList('7-9', instagram)).toEqual([7, 8, 9])
    expect(() => readShardList([], instagram)).toThrow(InvalidArgumentError)
    expect(() => readShardList({ from: 9, to: 7 }, instagram)).toThrow(InvalidArgumentError)
    expect(() => readShardList('8190-8192', instagram)).toThrow(ShardOutOfRangeError)
    expect(formatShardList([0, 1, 2, 5, 7, 8])).toBe('0-2,5,7-8')
    expect(parseShardList(formatShardList([0, 1, 2, 5, 7, 8]))).toEqual([0, 1, 2, 5, 7, 8])
  })
})

describe('JSON', () => {
  it('writes bigints as strings and leaves the rest alone', () => {
    expect(stringifyIds({ id: 2n ** 63n - 1n, n: 1, nested: [3n] })).toBe(
      '{"id":"9223372036854775807","n":1,"nested":["3"]}',
    )
  })
})
