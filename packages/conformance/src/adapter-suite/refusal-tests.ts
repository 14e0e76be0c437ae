import { MissingShardKeyError } from '@shardflake/core'
import { expect, it } from 'vitest'
import { findError } from '../routing'
import { settle } from './settle'
import type { AdapterSuiteState } from './suite-state'

/**
 * Writes that must leave nothing: a rolled-back transaction, a row without its shard key (missing,
 * empty or blank).
 */
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

  it('refuses an empty or blank shard key with MissingShardKeyError, like a missing one, before anything is written', async () => {
    const authors = await s.count('SELECT COUNT(*) FROM authors')
    const keyed = await s.count('SELECT COUNT(*) FROM keyed')
    for (const key of ['', '   ']) {
      const failure = await settle(s.blog.createKeyed(key))
      expect(findError(failure, MissingShardKeyError), JSON.stringify(key)).toBeInstanceOf(
        MissingShardKeyError,
      )
    }
    const noEmail = await settle(s.blog.createAuthor(''))
    expect(findError(noEmail, MissingShardKeyError)).toBeInstanceOf(MissingShardKeyError)
    expect(await s.count('SELECT COUNT(*) FROM authors')).toBe(authors)
    expect(await s.count('SELECT COUNT(*) FROM keyed')).toBe(keyed)
    expect(s.counting.idsIssued).toBe(0)
  })
}
