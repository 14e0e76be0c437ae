import { MissingShardKeyError } from '@shardflake/core'
import { expect, it } from 'vitest'
import { findError } from '../routing'
import type { AdapterSuiteState } from './suite-state'

/** Writes that must leave nothing: a rolled-back transaction, a row without its shard key. */
export function testRefusals(s: AdapterSuiteState): void {
  it('writes nothing when the transaction rolls back', async () => {
    await expect(
      s.blog.createPostThenFail({ authorId: s.ormId(s.authors[3]!), title: 'rolled back' }),
    ).rejects.toThrow()
    expect(
      await s.count(`SELECT COUNT(*) FROM posts WHERE title = ${s.p(1)}`, ['rolled back']),
    ).toBe(0)
  })

  it('refuses a row without its shard key or parent with MissingShardKeyError, before anything is written', async () => {
    const posts = await s.count('SELECT COUNT(*) FROM posts')
    const keyed = await s.count('SELECT COUNT(*) FROM keyed')
    const noParent = await settle(s.blog.createPost({ authorId: undefined, title: 'no author' }))
    expect(findError(noParent, MissingShardKeyError)).toBeInstanceOf(MissingShardKeyError)
    const noKey = await settle(s.blog.createKeyed(undefined))
    expect(findError(noKey, MissingShardKeyError)).toBeInstanceOf(MissingShardKeyError)
    expect(await s.count('SELECT COUNT(*) FROM posts')).toBe(posts)
    expect(await s.count('SELECT COUNT(*) FROM keyed')).toBe(keyed)
    expect(s.counting.idsIssued).toBe(0)
  })
}

/** The error `promise` rejects with, or undefined when it resolves. */
async function settle(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (caught: unknown) => caught,
  )
}
