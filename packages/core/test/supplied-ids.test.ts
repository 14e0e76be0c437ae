import { describe, expect, it } from 'vitest'
import {
  checkKeyChange,
  checkSuppliedId,
  defineSharding,
  InvalidIdError,
  instagram,
  MisplacedIdError,
  ShardKeyChangedError,
  suppliedIdsTrusted,
  trustSuppliedIds,
  UnsafeNumberError,
} from '../src'

const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
// One time for every ID of this file: two IDs of one shard compare equal however slow the run.
const past = Date.now() - 1000
const onShard = (shard: number) => sharding.layout.compose({ timestamp: past, shard, sequence: 3 })

describe('IDs the caller gives', () => {
  it('keeps an ID on the shard its rule gives, in any spelling, and returns it as a bigint', () => {
    const id = onShard(7)
    expect(checkSuppliedId(sharding, id, 7, 'Post')).toBe(id)
    expect(checkSuppliedId(sharding, id.toString(), 7, 'Post')).toBe(id)
  })

  it('refuses an ID on another shard with MisplacedIdError naming both shards and the way out', () => {
    const attempt = () => checkSuppliedId(sharding, onShard(7), 9, "Post (shardBy 'tenantId')")
    expect(attempt).toThrow(MisplacedIdError)
    expect(attempt).toThrow(/shard 7.*shard 9.*trustSuppliedIds/)
  })

  it('keeps the ID when the rule cannot be evaluated, or the source makes plain IDs', () => {
    expect(checkSuppliedId(sharding, onShard(7), undefined, 'Post')).toBe(onShard(7))
    expect(checkSuppliedId(undefined, 12345n, 9, 'Post')).toBe(12345n)
  })

  it('refuses values that are not exact 64-bit integers, even when trusted', async () => {
    const unsafe = Number(onShard(7))
    expect(() => checkSuppliedId(sharding, unsafe, 7, 'Post')).toThrow(UnsafeNumberError)
    expect(() => checkSuppliedId(sharding, 'abc', 7, 'Post')).toThrow(InvalidIdError)
    await expect(
      trustSuppliedIds(() => checkSuppliedId(sharding, unsafe, 7, 'Post')),
    ).rejects.toThrow(UnsafeNumberError)
  })

  it('refuses an update that moves a stored row to another shard with ShardKeyChangedError', () => {
    expect(() => checkKeyChange(sharding, onShard(7), 7, 'Tenant')).not.toThrow()
    expect(() => checkKeyChange(sharding, onShard(7), undefined, 'Tenant')).not.toThrow()
    expect(() => checkKeyChange(sharding, onShard(7), 9, 'Tenant')).toThrow(ShardKeyChangedError)
  })
})

describe('trustSuppliedIds', () => {
  it('turns both checks off for everything the write awaits, and only there', async () => {
    expect(suppliedIdsTrusted()).toBe(false)
    // One ID throughout: onShard reads the clock, and the await below may cross a millisecond.
    const id = onShard(7)
    const kept = await trustSuppliedIds(async () => {
      await new Promise((resolve) => setTimeout(resolve, 1))
      checkKeyChange(sharding, id, 9, 'Tenant')
      return checkSuppliedId(sharding, id, 9, 'Post')
    })
    expect(kept).toBe(id)
    expect(suppliedIdsTrusted()).toBe(false)
    expect(() => checkSuppliedId(sharding, id, 9, 'Post')).toThrow(MisplacedIdError)
  })

  it('runs a lazy thenable (a Prisma query) inside the scope', async () => {
    const seen: boolean[] = []
    const lazy: PromiseLike<string> = {
      // biome-ignore lint/suspicious/noThenProperty: a thenable that starts work only when awaited, as Prisma's queries do
      then(onFulfilled, onRejected) {
        seen.push(suppliedIdsTrusted())
        return Promise.resolve('done').then(onFulfilled, onRejected)
      },
    }
    expect(await trustSuppliedIds(() => lazy)).toBe('done')
    expect(seen).toEqual([true])
  })

  it('passes a rejection through', async () => {
    await expect(
      trustSuppliedIds(() => {
        throw new Error('boom')
      }),
    ).rejects.toThrow('boom')
  })
})
