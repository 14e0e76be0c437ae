import { expect, it } from 'vitest'
import { expectedShard, ROUTING_KEYS } from '../routing'
import type { AdapterSuiteState } from './suite-state'

/**
 * Shard rules: a row keyed by a string or a shard key lands on the shard computed independently
 * of core, a child on its parent's.
 */
export function testShardRouting(s: AdapterSuiteState): void {
  it('gives an author an ID before the INSERT, on the shard of the hash of its email, in the ORM type', async () => {
    const id = await s.blog.createAuthor('edsger@example.com')
    expect(typeof id).toBe(s.blog.idType)
    const [row] = await s.rows(`SELECT id FROM authors WHERE email = ${s.p(1)}`, [
      'edsger@example.com',
    ])
    expect(String(row?.id)).toBe(String(id))
    expect(s.shardOf(row?.id)).toBe(expectedShard('edsger@example.com', s.sharding.logicalShards))
  })

  it('routes every kind of shard key to the shard computed independently (integers, digit strings, other strings, huge integers)', async () => {
    const written = new Map<string, string>()
    for (const key of ROUTING_KEYS) written.set(key, String(await s.blog.createKeyed(key)))
    const stored = await s.rows('SELECT id, shard_key FROM keyed WHERE shard_key IS NOT NULL')
    expect(stored).toHaveLength(ROUTING_KEYS.length)
    for (const row of stored) {
      const key = String(row.shard_key)
      expect(written.get(key), `the ID returned for key ${JSON.stringify(key)}`).toBe(
        String(row.id),
      )
      expect(s.shardOf(row.id), `the shard of key ${JSON.stringify(key)}`).toBe(
        expectedShard(key, s.sharding.logicalShards),
      )
    }
  })

  it("gives a post an ID on its author's shard, read from the author's ID", async () => {
    const author = s.authors[0]!
    const id = await s.blog.createPost({ authorId: s.ormId(author), title: 'single' })
    expect(typeof id).toBe(s.blog.idType)
    const stored = await s.rows(`SELECT id, author_id FROM posts WHERE title = ${s.p(1)}`, [
      'single',
    ])
    expect(stored).toHaveLength(1)
    expect(String(stored[0]?.id)).toBe(String(id))
    expect(String(stored[0]?.author_id)).toBe(author.toString())
    expect(s.shardOf(stored[0]?.id)).toBe(s.shardOf(stored[0]?.author_id))
  })
}

/** After every other test: each row of each table decodes to the shard its rule gives. */
export function testStoredShards(s: AdapterSuiteState): void {
  it('stores every row on the shard its rule gives', async () => {
    for (const row of await s.rows('SELECT id, email FROM authors')) {
      expect(s.shardOf(row.id)).toBe(expectedShard(String(row.email), s.sharding.logicalShards))
    }
    for (const row of await s.rows('SELECT id, author_id FROM posts')) {
      expect(s.shardOf(row.id)).toBe(s.shardOf(row.author_id))
    }
    for (const row of await s.rows('SELECT id, post_id FROM comments')) {
      expect(s.shardOf(row.id)).toBe(s.shardOf(row.post_id))
    }
    for (const row of await s.rows('SELECT id, shard_key FROM keyed')) {
      expect(s.shardOf(row.id)).toBe(expectedShard(String(row.shard_key), s.sharding.logicalShards))
    }
    expect(await s.count('SELECT COUNT(*) FROM comments')).toBeGreaterThan(0)
  })
}
