import { expect, it } from 'vitest'
import type { AdapterSuiteState } from './suite-state'

/**
 * The ORM's insert paths: a batch in one call (one source call per shard), cascaded children, a
 * child pushed onto a loaded collection, and an ID the caller set.
 */
export function testInsertPaths(s: AdapterSuiteState): void {
  it('inserts many rows with distinct IDs, asking the source once per shard', async () => {
    const posts = Array.from({ length: 60 }, (_, i) => ({
      authorId: s.ormId(s.authors[i % s.authors.length]!),
      title: `batch ${i}`,
    }))
    const ids = await s.blog.createPosts(posts)
    expect(ids).toHaveLength(60)
    expect(new Set(ids.map(String)).size).toBe(60)
    const stored = await s.rows(`SELECT id, author_id, title FROM posts WHERE title LIKE 'batch %'`)
    expect(stored).toHaveLength(60)
    for (const row of stored) {
      const index = Number(String(row.title).slice('batch '.length))
      expect(String(row.id)).toBe(String(ids[index]))
      expect(s.shardOf(row.id)).toBe(s.shardOf(row.author_id))
    }
    const shards = new Set(s.authors.map((author) => s.shardOf(author))).size
    if (!s.inner.synchronous) {
      expect(s.counting.nextIdCalls).toBe(0)
      expect(s.counting.nextIdsCalls).toBeLessThanOrEqual(shards)
    }
    expect(s.counting.idsIssued).toBeGreaterThanOrEqual(60)
  })

  it('co-locates cascaded children with their parent: comment, post and author IDs decode to one shard', async () => {
    const author = s.authors[1]!
    const { postId, commentIds } = await s.blog.createPostWithComments(
      { authorId: s.ormId(author), title: 'with comments' },
      ['first', 'second', 'third'],
    )
    const stored = await s.rows(
      `SELECT c.id, c.post_id, p.author_id FROM comments c JOIN posts p ON p.id = c.post_id WHERE p.title = ${s.p(1)}`,
      ['with comments'],
    )
    expect(stored).toHaveLength(3)
    expect(new Set(stored.map((row) => String(row.id)))).toEqual(new Set(commentIds.map(String)))
    for (const row of stored) {
      expect(String(row.post_id)).toBe(String(postId))
      expect(String(row.author_id)).toBe(author.toString())
      expect(s.shardOf(row.id)).toBe(s.shardOf(row.post_id))
      expect(s.shardOf(row.post_id)).toBe(s.shardOf(row.author_id))
    }
  })

  it("puts a comment pushed onto a loaded post's collection on the post's shard", async () => {
    const author = s.authors[2]!
    const { postId, commentIds } = await s.blog.createPostWithComments(
      { authorId: s.ormId(author), title: 'loaded later' },
      ['early'],
    )
    const commentId = await s.blog.addCommentToLoadedPost(postId, 'late')
    expect(typeof commentId).toBe(s.blog.idType)
    const stored = await s.rows(
      `SELECT id, post_id, body FROM comments WHERE post_id = ${s.p(1)}`,
      [String(postId)],
    )
    expect(stored.map((row) => String(row.body)).sort()).toEqual(['early', 'late'])
    const late = stored.find((row) => row.body === 'late')!
    expect(String(late.id)).toBe(String(commentId))
    expect(String(stored.find((row) => row.body === 'early')?.id)).toBe(String(commentIds[0]))
    expect(s.shardOf(late.id)).toBe(s.shardOf(postId))
    expect(s.shardOf(late.id)).toBe(s.shardOf(author))
  })

  it('keeps an ID the caller set', async () => {
    const author = s.authors[2]!
    const yesterday = Date.now() - 86_400_000 // no source hands out IDs of yesterday
    const chosen = s.sharding.layout.compose({
      timestamp: yesterday,
      shard: s.shardOf(author),
      sequence: 7,
    })
    const id = await s.blog.createPost({
      authorId: s.ormId(author),
      title: 'chosen',
      id: s.ormId(chosen),
    })
    expect(String(id)).toBe(chosen.toString())
    expect(
      await s.count(`SELECT COUNT(*) FROM posts WHERE id = ${s.p(1)}`, [chosen.toString()]),
    ).toBe(1)
  })
}
