/** The README's quick start, as written there (schema created by MikroORM in a fresh database). */
import { defineEntity, p } from '@mikro-orm/core'
import { MikroORM } from '@mikro-orm/postgresql'
import { freshDatabase } from '@shardflake/conformance'
import { defineSharding, InProcessSource, instagram } from '@shardflake/core'
import { expect, it } from 'vitest'
import { shardedId, shardedIds } from '../src'

it('runs the quick start: a post on its author shard, decoded from both IDs', async () => {
  const raw = await freshDatabase('postgres', 'sf_mikro_readme')
  const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
  const User = defineEntity({
    name: 'User',
    properties: { id: shardedId({ shardBy: 'email' }), email: p.string() },
  })
  const Post = defineEntity({
    name: 'Post',
    properties: {
      id: shardedId({ sameShardAs: 'author' }), // on its author's shard
      author: () => p.manyToOne(User),
      title: p.string(),
    },
  })
  const source = new InProcessSource({ sharding, shards: 'all' })
  const orm = await MikroORM.init({
    clientUrl: raw.url,
    entities: [User, Post],
    extensions: [shardedIds({ source })],
  })
  try {
    await orm.schema.create()
    const em = orm.em.fork()
    const author = em.create(User, { email: 'ada@example.com' })
    const post = em.create(Post, { author, title: 'hello' })
    await em.flush()
    expect(sharding.shardOfId(post.id)).toBe(sharding.shardOfId(author.id))
    const [row] = await raw.query('SELECT id::text AS id, author_id::text AS author FROM post')
    expect(row).toEqual({ id: String(post.id), author: String(author.id) })
  } finally {
    await orm.close(true)
    source.close()
    await raw.close()
  }
})
