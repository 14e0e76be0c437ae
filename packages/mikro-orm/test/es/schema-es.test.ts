import { postgresUrl, testSharding } from '@shardflake/conformance'
import { InProcessSource } from '@shardflake/core'
import { expect, it } from 'vitest'
import { shardedIds } from '../../src'
import { openOrm } from '../support/blog'
import { Author, Comment, Keyed, Post } from './entities-es'

it('declares standard-decorator keys as BIGINTs the database does not generate, filled at em.create()', async () => {
  const sharding = testSharding()
  const source = new InProcessSource({ sharding, shards: 'all' })
  const orm = await openOrm(
    'postgres',
    postgresUrl(),
    [Author, Post, Comment, Keyed],
    [shardedIds({ source })],
  )
  try {
    const sql = await orm.schema.getCreateSchemaSQL({ wrap: false })
    for (const table of ['authors', 'posts', 'comments', 'keyed']) {
      expect(sql).toMatch(new RegExp(`create table "${table}" \\("id" bigint not null`))
    }
    expect(sql).not.toMatch(/bigserial|generated/)
    const em = orm.em.fork()
    const author = em.create(Author, { email: 'es@example.com' })
    const post = em.create(Post, { author, title: 'es' })
    expect(typeof author.id).toBe('bigint')
    expect(sharding.shardOfId(post.id)).toBe(sharding.shardOfId(author.id))
  } finally {
    await orm.close(true)
    source.close()
  }
})
