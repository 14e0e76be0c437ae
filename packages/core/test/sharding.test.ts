import { describe, expect, it } from 'vitest'
import {
  checkShardRule,
  defineLayout,
  defineSharding,
  hashShard,
  InvalidArgumentError,
  InvalidIdError,
  InvalidShardRuleError,
  instagram,
  MissingShardKeyError,
  Sharding,
  ShardingMismatchError,
  ShardOutOfRangeError,
  shardByOnShardedIdError,
} from '../src'
import { sharding } from './support'

const idOn = (shard: number, layout = instagram) =>
  layout.compose({ timestamp: Date.UTC(2026, 0, 1), shard, sequence: 1 })

describe('defineSharding', () => {
  it('takes a layout and a logicalShards from 1 to the layout shardCount', () => {
    const made = defineSharding({ layout: instagram, logicalShards: 2000 })
    expect(made).toBeInstanceOf(Sharding)
    expect(made.layout).toBe(instagram)
    expect(made.logicalShards).toBe(2000)
    expect(Object.isFrozen(made)).toBe(true)
    expect(defineSharding({ layout: instagram, logicalShards: 1 }).logicalShards).toBe(1)
    expect(defineSharding({ layout: instagram, logicalShards: 8192 }).logicalShards).toBe(8192)
    expect(made.toJSON()).toEqual({ layout: instagram.toJSON(), logicalShards: 2000 })
  })

  it('refuses a missing layout and a logicalShards that is not 1 to shardCount', () => {
    for (const logicalShards of [0, -1, 1.5, 8193, Number.NaN, undefined, '64']) {
      expect(
        () => defineSharding({ layout: instagram, logicalShards: logicalShards as number }),
        String(logicalShards),
      ).toThrow(InvalidArgumentError)
    }
    expect(() => defineSharding({ logicalShards: 64 } as never)).toThrow(InvalidArgumentError)
    expect(() => defineSharding(undefined as never)).toThrow(InvalidArgumentError)
    expect(() => defineSharding({ layout: instagram, logicalShards: 8193 })).toThrow(/1 to 8192/)
  })
})

describe('Sharding', () => {
  it("places keys as in 'Sharding & IDs at Instagram' and reads shards back from IDs", () => {
    expect(sharding.shardForKey(31341n)).toBe(1341)
    expect(sharding.shardForKey('31341')).toBe(1341)
    expect(sharding.shardForKey('31341', 'hash')).toBe(hashShard('31341', 2000))
    expect(sharding.shardOfId(idOn(1341))).toBe(1341)
    expect(sharding.shardOfId(idOn(1341).toString())).toBe(1341)
    expect(() => sharding.shardOfId(idOn(2000))).toThrow(ShardOutOfRangeError)
    expect(() => sharding.shardOfId('not an id')).toThrow(InvalidIdError)
    expect(sharding.checkShard(1999)).toBe(1999)
    for (const shard of [-1, 2000, 1.5]) {
      expect(() => sharding.checkShard(shard)).toThrow(ShardOutOfRangeError)
    }
  })

  describe('resolveShard', () => {
    type Row = Record<string, unknown>

    it('shardBy a field: integers by modulo, digit strings as integers, other strings hashed', () => {
      const rule = { shardBy: 'userId' } as const
      expect(sharding.resolveShard<Row>(rule, { userId: 31341 })).toBe(1341)
      expect(sharding.resolveShard<Row>(rule, { userId: 31341n })).toBe(1341)
      expect(sharding.resolveShard<Row>(rule, { userId: '31341' })).toBe(1341)
      expect(sharding.resolveShard<Row>(rule, { userId: -1n })).toBe(1999)
      expect(sharding.resolveShard<Row>(rule, { userId: 'acme' })).toBe(hashShard('acme', 2000))
      expect(
        sharding.resolveShard<Row>({ shardBy: 'zip', stringKeys: 'hash' }, { zip: '02134' }),
      ).toBe(hashShard('02134', 2000))
      expect(sharding.resolveShard<Row>({ shardBy: 'zip' }, { zip: '02134' })).toBe(134)
    })

    it('shardBy a function', () => {
      expect(
        sharding.resolveShard<{ email: string }>(
          { shardBy: (row) => row.email.toLowerCase() },
          { email: 'A@B.C' },
        ),
      ).toBe(hashShard('a@b.c', 2000))
    })

    it("sameShardAs a field or a function: the parent's shard, read from its ID", () => {
      const parent = idOn(77)
      expect(sharding.resolveShard<Row>({ sameShardAs: 'postId' }, { postId: parent })).toBe(77)
      expect(
        sharding.resolveShard<Row>({ sameShardAs: 'postId' }, { postId: parent.toString() }),
      ).toBe(77)
      expect(
        sharding.resolveShard<{ post: { id: bigint } }>(
          { sameShardAs: (row) => row.post.id },
          { post: { id: parent } },
        ),
      ).toBe(77)
      // Not the ID modulo logicalShards: the shard bits.
      expect(Number(parent % 2000n)).not.toBe(77)
    })

    it('shard: a fixed logical shard', () => {
      expect(sharding.resolveShard<Row>({ shard: 12 }, {})).toBe(12)
    })

    it('refuses a missing key or parent, a key of another type, and shards outside the logical shards', () => {
      const draft: Row = {}
      expect(() => sharding.resolveShard<Row>({ shardBy: 'userId' }, { userId: null })).toThrow(
        MissingShardKeyError,
      )
      expect(() => sharding.resolveShard<Row>({ shardBy: 'userId' }, draft, 'Post')).toThrow(
        /shard key of Post \(field 'userId'\)/,
      )
      expect(() => sharding.resolveShard<Row>({ sameShardAs: 'postId' }, draft, 'Comment')).toThrow(
        MissingShardKeyError,
      )
      expect(() =>
        sharding.resolveShard<Row>({ shardBy: () => undefined as never }, draft, 'Post'),
      ).toThrow(MissingShardKeyError)
      expect(() => sharding.resolveShard<Row>({ shardBy: 'flag' }, { flag: true })).toThrow(
        InvalidArgumentError,
      )
      expect(() => sharding.resolveShard<Row>({ shard: 2500 }, {})).toThrow(ShardOutOfRangeError)
      expect(() =>
        sharding.resolveShard<Row>({ sameShardAs: 'postId' }, { postId: idOn(4000) }),
      ).toThrow(ShardOutOfRangeError)
    })
  })

  it('equals and checkSame: same layout and logicalShards, or ShardingMismatchError', () => {
    const same = defineSharding({ layout: instagram, logicalShards: 2000 })
    expect(sharding.equals(same)).toBe(true)
    expect(sharding.equals(same.toJSON())).toBe(true)
    expect(sharding.equals(JSON.parse(JSON.stringify(same)))).toBe(true)
    sharding.checkSame(same, 'the other source')
    sharding.checkSame(JSON.parse(JSON.stringify(same)), 'database app_0001')

    const fewer = defineSharding({ layout: instagram, logicalShards: 64 })
    expect(sharding.equals(fewer)).toBe(false)
    expect(() => sharding.checkSame(fewer, 'database app_0001')).toThrow(ShardingMismatchError)
    expect(() => sharding.checkSame(fewer.toJSON(), 'database app_0001')).toThrow(
      /logicalShards 64.*logicalShards 2000/,
    )
    const otherEpoch = defineSharding({
      layout: defineLayout({
        epoch: '2025-01-01T00:00:00Z',
        timeBits: 41,
        shardBits: 13,
        sequenceBits: 10,
      }),
      logicalShards: 2000,
    })
    expect(() => sharding.checkSame(otherEpoch, 'the source of shards 0-99')).toThrow(
      ShardingMismatchError,
    )
    try {
      sharding.checkSame(fewer, 'x')
    } catch (error) {
      expect((error as ShardingMismatchError).code).toBe('SHARDING_MISMATCH')
    }
  })
})

describe('checkShardRule', () => {
  it('accepts exactly one of shardBy, sameShardAs, shard', () => {
    const fn = () => 1
    for (const rule of [
      { shardBy: 'userId' },
      { shardBy: fn },
      { shardBy: 'zip', stringKeys: 'hash' },
      { sameShardAs: 'post' },
      { sameShardAs: fn },
      { shard: 0 },
      { shard: 12 },
    ]) {
      expect(checkShardRule(rule, 'Post')).toBe(rule)
    }
  })

  it('refuses anything else with InvalidShardRuleError naming the entity', () => {
    for (const rule of [
      undefined,
      null,
      'userId',
      {},
      { shardBy: 'a', sameShardAs: 'b' },
      { shardBy: 'a', shard: 1 },
      { shardBy: '' },
      { shardBy: 5 },
      { sameShardAs: {} },
      { shard: -1 },
      { shard: 1.5 },
      { shard: '3' },
      { shardBy: 'zip', stringKeys: 'hashed' },
      { sameShardAs: 'post', stringKeys: 'hash' },
    ]) {
      expect(() => checkShardRule(rule, 'Post'), JSON.stringify(rule)).toThrow(
        InvalidShardRuleError,
      )
    }
    expect(() => checkShardRule({}, 'Comment')).toThrow(/Comment/)
  })

  it('refuses a misspelt property, naming the closest, when told the other options', () => {
    const options = ['name', 'comment']
    expect(checkShardRule({ shardBy: 'zip', name: 'id' }, 'Post', options)).toEqual({
      shardBy: 'zip',
      name: 'id',
    })
    expect(() => checkShardRule({ shardBy: 'zip', stringkeys: 'hash' }, 'Post', options)).toThrow(
      /no option "stringkeys". Did you mean "stringKeys"\?/,
    )
    expect(() => checkShardRule({ shardBy: 'zip', coment: 'x' }, 'Post', options)).toThrow(
      InvalidArgumentError,
    )
    // Without the list, other properties pass: the caller may hand over a wider object.
    expect(checkShardRule({ shardBy: 'zip', coment: 'x' }, 'Post')).toBeTruthy()
  })

  it('shardByOnShardedIdError points at sameShardAs', () => {
    const error = shardByOnShardedIdError('Comment', 'postId', 'Post', 'post')
    expect(error).toBeInstanceOf(InvalidShardRuleError)
    expect(error.code).toBe('INVALID_SHARD_RULE')
    expect(error.message).toMatch(/sameShardAs: 'post'/)
  })
})
