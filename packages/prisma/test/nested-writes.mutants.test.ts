/**
 * A child created under a parent created in the same call goes to its own parent's shard, not
 * the shard of the call's top-level row: the two differ when the parent has a caller's ID on
 * another shard (an imported row), checked through raw SQL.
 */
import { type RawDatabase, testSharding } from '@shardflake/conformance'
import { InProcessSource, trustSuppliedIds } from '@shardflake/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { blogClient, type PgBlogClient } from './support/clients'
import { blogDatabase } from './support/database'

const sharding = testSharding()
const source = new InProcessSource({ sharding, shards: 'all' })
afterAll(() => source.close())

describe.each([
  ['PostgreSQL', 'postgres'],
  ['MariaDB', 'mysql'],
] as const)('%s: a sameShardAs chain that does not end at the top-level row', (_, dialect) => {
  const shardOf = (id: unknown) => sharding.shardOfId(String(id))
  let raw: RawDatabase
  let prisma: PgBlogClient

  beforeAll(async () => {
    raw = await blogDatabase(dialect, `sf_prisma_${dialect === 'postgres' ? 'pg' : 'my'}_chain`)
    prisma = blogClient(dialect, raw.url, source)
  })
  afterAll(async () => {
    await prisma?.$disconnect()
    await raw?.close()
  })

  it('puts comments created under a new post on the post’s shard, not its new author’s', async () => {
    const email = `chain-${dialect}@example.com`
    const authorShard = sharding.shardForKey(email)
    const postShard = (authorShard + 1) % sharding.logicalShards
    const postId = sharding.layout.compose({
      timestamp: Date.now() - 86_400_000,
      shard: postShard,
      sequence: 7,
    })
    await trustSuppliedIds(() =>
      prisma.author.create({
        data: {
          email,
          posts: {
            create: [
              {
                id: postId,
                title: 'imported',
                comments: { create: [{ body: 'c1' }, { body: 'c2' }] },
              },
              { title: 'new', comments: { create: { body: 'c3' } } },
            ],
          },
        },
      }),
    )
    const [author] = await raw.query(`SELECT id FROM authors WHERE email = '${email}'`)
    expect(shardOf(author?.id)).toBe(authorShard)
    const posts = await raw.query(`SELECT id, title FROM posts WHERE author_id = ${author?.id}`)
    const byTitle = new Map(posts.map((row) => [String(row.title), String(row.id)]))
    expect(byTitle.get('imported')).toBe(String(postId))
    const comments = await raw.query(
      `SELECT id, post_id, body FROM comments WHERE post_id IN (${[...byTitle.values()].join(',')}) ORDER BY body`,
    )
    expect(comments.map((row) => String(row.body))).toEqual(['c1', 'c2', 'c3'])
    for (const comment of comments) expect(shardOf(comment.id)).toBe(shardOf(comment.post_id))
    expect(comments.slice(0, 2).map((row) => shardOf(row.id))).toEqual([postShard, postShard])
    expect(shardOf(comments[2]?.id)).toBe(authorShard)
  })
})
