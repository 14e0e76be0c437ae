import { describe, expect, it } from 'vitest'
import {
  checkShardColumn,
  checkShardColumnChange,
  checkShardRule,
  defineSharding,
  fillShardColumn,
  InvalidArgumentError,
  InvalidShardRuleError,
  instagram,
  MisplacedIdError,
  ShardKeyChangedError,
  setShardColumn,
  shardColumnOf,
  trustSuppliedIds,
} from '../src'

const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
const past = Date.now() - 1000
const onShard = (shard: number) => sharding.layout.compose({ timestamp: past, shard, sequence: 3 })

describe('shardColumn in a rule', () => {
  it('is read from the rule, and checked with it', () => {
    expect(shardColumnOf({ shardBy: 'tenantId', shardColumn: 'lshard' })).toBe('lshard')
    expect(shardColumnOf({ shardBy: 'tenantId' })).toBeUndefined()
    const rule = { sameShardAs: 'post', shardColumn: 'lshard' }
    expect(checkShardRule(rule, 'Comment', ['type'])).toBe(rule)
  })

  it('refuses a name that is empty, not a string, the ID, or the field the rule reads', () => {
    for (const shardColumn of ['', ' ', 7, null]) {
      expect(() => checkShardRule({ shardBy: 'tenantId', shardColumn }, 'Post')).toThrow(
        InvalidShardRuleError,
      )
    }
    expect(() => checkShardRule({ shardBy: 'tenantId', shardColumn: 'tenantId' }, 'Post')).toThrow(
      /the field the rule reads/,
    )
    expect(() => checkShardRule({ sameShardAs: 'postId', shardColumn: 'postId' }, 'C')).toThrow(
      InvalidShardRuleError,
    )
    expect(() =>
      checkShardColumn({ shard: 1, shardColumn: 'id' }, 'Post', { idField: 'id' }),
    ).toThrow(/the ID itself/)
  })

  it('refuses a property the entity does not have, when the adapter knows them', () => {
    const fields = ['id', 'tenantId', 'lshard']
    expect(checkShardColumn({ shard: 1, shardColumn: 'lshard' }, 'Post', { fields })).toBe('lshard')
    expect(() => checkShardColumn({ shard: 1, shardColumn: 'lshrad' }, 'Post', { fields })).toThrow(
      /does not have.*lshard/,
    )
    expect(checkShardColumn({ shard: 1 }, 'Post', { fields })).toBeUndefined()
  })
})

describe('fillShardColumn', () => {
  it("fills a missing value with the ID's shard", () => {
    const row: Record<string, unknown> = { id: onShard(9), lshard: null }
    expect(fillShardColumn(sharding, row, 'lshard', onShard(9), 'Post')).toBe(9)
    expect(row.lshard).toBe(9)
    const other: Record<string, unknown> = {}
    fillShardColumn(sharding, other, 'lshard', onShard(41).toString(), 'Post')
    expect(other.lshard).toBe(41)
  })

  it("keeps a value equal to the ID's shard, in any integer spelling", () => {
    for (const lshard of [9, 9n, '9']) {
      const row = { lshard }
      expect(fillShardColumn(sharding, row, 'lshard', onShard(9), 'Post')).toBe(9)
      expect(row.lshard).toBe(lshard)
    }
  })

  it('refuses another shard with MisplacedIdError, trusted IDs too, and a non-integer', async () => {
    const attempt = () => fillShardColumn(sharding, { lshard: 8 }, 'lshard', onShard(9), 'Post')
    expect(attempt).toThrow(MisplacedIdError)
    expect(attempt).toThrow(/'lshard'.* 8.*shard 9/)
    await expect(trustSuppliedIds(attempt)).rejects.toThrow(MisplacedIdError)
    expect(() =>
      fillShardColumn(sharding, { lshard: 'nine' }, 'lshard', onShard(9), 'Post'),
    ).toThrow(InvalidArgumentError)
    expect(() => fillShardColumn(sharding, { lshard: 9.5 }, 'lshard', onShard(9), 'Post')).toThrow(
      InvalidArgumentError,
    )
  })
})

describe('setShardColumn', () => {
  it('fills the shard a row is about to get, and refuses another before any ID is spent', () => {
    const row: Record<string, unknown> = {}
    expect(setShardColumn(row, 'lshard', 12, 'Post')).toBe(12)
    expect(row.lshard).toBe(12)
    expect(setShardColumn({ lshard: '12' }, 'lshard', 12, 'Post')).toBe(12)
    expect(() => setShardColumn({ lshard: 11 }, 'lshard', 12, 'Post')).toThrow(MisplacedIdError)
  })
})

describe('checkShardColumnChange', () => {
  it("passes a write that leaves the column out or keeps the ID's shard", () => {
    expect(() =>
      checkShardColumnChange(sharding, onShard(5), 'lshard', undefined, 'P'),
    ).not.toThrow()
    expect(() => checkShardColumnChange(sharding, onShard(5), 'lshard', 5, 'P')).not.toThrow()
  })

  it('refuses another shard with ShardKeyChangedError, and null as not an integer', () => {
    expect(() => checkShardColumnChange(sharding, onShard(5), 'lshard', 6, 'Post')).toThrow(
      ShardKeyChangedError,
    )
    expect(() => checkShardColumnChange(sharding, onShard(5), 'lshard', null, 'Post')).toThrow(
      InvalidArgumentError,
    )
  })
})
