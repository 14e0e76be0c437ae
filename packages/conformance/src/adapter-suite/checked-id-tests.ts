import {
  MisplacedIdError,
  ShardKeyChangedError,
  trustSuppliedIds,
  UnsafeNumberError,
} from '@shardflake/core'
import { expect, it } from 'vitest'
import { expectedShard, findError } from '../routing'
import { settle } from './settle'
import type { AdapterSuiteState } from './suite-state'

/**
 * IDs the adapter did not make: one the caller gives a new row must be on the shard the row's rule
 * gives, or be refused before anything is written; `trustSuppliedIds` keeps it as given (imports).
 */
export function testSuppliedIds(s: AdapterSuiteState): void {
  const yesterday = () => Date.now() - 86_400_000 // no source hands out IDs of yesterday
  /** A caller's ID on `shard`; `sequence` keeps the tests' IDs apart. */
  const idOn = (shard: number, sequence: number) =>
    s.sharding.layout.compose({ timestamp: yesterday(), shard, sequence })
  const otherShard = (shard: number) => (shard + 1) % s.sharding.logicalShards
  const keyShard = (key: string) => expectedShard(key, s.sharding.logicalShards)
  const keyedRows = (key: string) =>
    s.rows(`SELECT id FROM keyed WHERE shard_key = ${s.p(1)}`, [key])

  it("refuses a caller's ID on another shard than its parent's with MisplacedIdError, before anything is written", async () => {
    const author = s.authors[1]!
    const wrong = idOn(otherShard(s.shardOf(author)), 11)
    const failure = await settle(
      s.blog.createPost({ authorId: s.ormId(author), title: 'misplaced', id: s.ormId(wrong) }),
    )
    expect(findError(failure, MisplacedIdError)).toBeInstanceOf(MisplacedIdError)
    expect(
      await s.count(`SELECT COUNT(*) FROM posts WHERE id = ${s.p(1)} OR title = ${s.p(2)}`, [
        wrong.toString(),
        'misplaced',
      ]),
    ).toBe(0)
    expect(s.counting.idsIssued).toBe(0)
  })

  it("refuses a caller's ID on another shard than its own key's with MisplacedIdError, and keeps one on the right shard", async () => {
    const key = 'supplied@example.com'
    const wrong = idOn(otherShard(keyShard(key)), 12)
    const failure = await settle(s.blog.createKeyed(key, s.ormId(wrong)))
    expect(findError(failure, MisplacedIdError)).toBeInstanceOf(MisplacedIdError)
    expect(await keyedRows(key)).toHaveLength(0)
    const right = idOn(keyShard(key), 12)
    expect(String(await s.blog.createKeyed(key, s.ormId(right)))).toBe(right.toString())
    expect((await keyedRows(key)).map((row) => String(row.id))).toEqual([right.toString()])
    expect(s.counting.idsIssued).toBe(0)
  })

  it("refuses a caller's ID given as a number above 2^53 with UnsafeNumberError: it has lost digits", async () => {
    const key = 'unsafe-number'
    const id = idOn(keyShard(key), 13) // odd: its low bits do not survive a double
    expect(BigInt(Number(id))).not.toBe(id)
    const failure = await settle(s.blog.createKeyed(key, Number(id)))
    expect(findError(failure, UnsafeNumberError)).toBeInstanceOf(UnsafeNumberError)
    expect(await keyedRows(key)).toHaveLength(0)
  })

  it("keeps a caller's ID on another shard inside trustSuppliedIds (imports), for own keys and parents", async () => {
    const key = 'imported@example.com'
    const keyed = idOn(otherShard(keyShard(key)), 14)
    expect(String(await trustSuppliedIds(() => s.blog.createKeyed(key, s.ormId(keyed))))).toBe(
      keyed.toString(),
    )
    const author = s.authors[2]!
    const post = idOn(otherShard(s.shardOf(author)), 14)
    await trustSuppliedIds(() =>
      s.blog.createPost({ authorId: s.ormId(author), title: 'imported', id: s.ormId(post) }),
    )
    expect((await keyedRows(key)).map((row) => String(row.id))).toEqual([keyed.toString()])
    const [stored] = await s.rows(`SELECT id FROM posts WHERE title = ${s.p(1)}`, ['imported'])
    expect(String(stored?.id)).toBe(post.toString())
    // Outside the scope the check is back.
    const again = await settle(
      s.blog.createKeyed(key, s.ormId(idOn(otherShard(keyShard(key)), 15))),
    )
    expect(findError(again, MisplacedIdError)).toBeInstanceOf(MisplacedIdError)
    // Off their rule's shard on purpose: gone before the suite checks every row's shard.
    await s.raw.query(`DELETE FROM keyed WHERE id = ${s.p(1)}`, [keyed.toString()])
    await s.raw.query(`DELETE FROM posts WHERE id = ${s.p(1)}`, [post.toString()])
  })
}

/**
 * Upserts of a stored row: a new key must stay on the shard of the row's ID, or the upsert is
 * refused with ShardKeyChangedError before anything is written.
 */
export function testKeyChanges(s: AdapterSuiteState): void {
  const keyShard = (key: string) => expectedShard(key, s.sharding.logicalShards)
  /** The first of `prefix-0`, `prefix-1`, ... that is (or is not) on `shard`. */
  const keyWhere = (prefix: string, onShard: boolean, shard: number) => {
    for (let i = 0; ; i++) {
      const key = `${prefix}-${i}`
      if ((keyShard(key) === shard) === onShard) return key
    }
  }
  const storedKey = async (id: unknown) =>
    (await s.rows(`SELECT shard_key FROM keyed WHERE id = ${s.p(1)}`, [String(id)]))[0]?.shard_key

  it("refuses an upsert that moves a stored row's key to another shard with ShardKeyChangedError, leaving the row as it was", async () => {
    const id = await s.blog.createKeyed('upsert-me')
    const shard = s.shardOf(id)
    const elsewhere = keyWhere('upsert-elsewhere', false, shard)
    const failure = await settle(s.blog.upsertKeyed(id, elsewhere))
    expect(findError(failure, ShardKeyChangedError)).toBeInstanceOf(ShardKeyChangedError)
    expect(await storedKey(id)).toBe('upsert-me')
    expect(
      await s.count(`SELECT COUNT(*) FROM keyed WHERE shard_key = ${s.p(1)}`, [elsewhere]),
    ).toBe(0)
  })

  it('lets an upsert set a key on the same shard, and insert a new row under the given ID', async () => {
    const id = await s.blog.createKeyed('upsert-same')
    const same = keyWhere('upsert-same', true, s.shardOf(id))
    await s.blog.upsertKeyed(id, same)
    expect(await storedKey(id)).toBe(same)
    const fresh = s.sharding.layout.compose({
      timestamp: Date.now() - 86_400_000,
      shard: keyShard('upsert-new'),
      sequence: 21,
    })
    await s.blog.upsertKeyed(s.ormId(fresh), 'upsert-new')
    expect(await storedKey(fresh)).toBe('upsert-new')
  })

  it("lets an upsert move a stored row's key inside trustSuppliedIds", async () => {
    const id = await s.blog.createKeyed('upsert-trusted')
    const elsewhere = keyWhere('upsert-trusted', false, s.shardOf(id))
    await trustSuppliedIds(() => s.blog.upsertKeyed(id, elsewhere))
    expect(await storedKey(id)).toBe(elsewhere)
    await s.raw.query(`DELETE FROM keyed WHERE id = ${s.p(1)}`, [String(id)])
  })
}
