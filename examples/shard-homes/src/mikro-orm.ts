/**
 * The blog through MikroORM: one MikroORM instance per server, each with the `shardedIds()`
 * extension, routed by `shardedOrms()`. Entities are declared with `defineEntity`, so Node runs
 * this file as it is.
 */
import { defineEntity, type MikroORM, p } from '@mikro-orm/core'
import { MikroORM as MariadbOrm } from '@mikro-orm/mariadb'
import { type AbstractSqlDriver, MikroORM as PostgresOrm } from '@mikro-orm/postgresql'
import { ShardHomes } from '@shardflake/core'
import { shardedId, shardedIds, shardedOrms } from '@shardflake/mikro-orm'
import type { BlogOptions, NewPost, RoutedBlog } from './blog.ts'
import { sharding, shardMap } from './servers.ts'

const User = defineEntity({
  name: 'User',
  tableName: 'users',
  properties: { id: shardedId({ shardBy: 'email' }), email: p.string() },
})
const Post = defineEntity({
  name: 'Post',
  tableName: 'posts',
  properties: {
    id: shardedId({ sameShardAs: 'user' }),
    user: () => p.manyToOne(User),
    title: p.string(),
  },
})
const Comment = defineEntity({
  name: 'Comment',
  tableName: 'comments',
  properties: {
    id: shardedId({ sameShardAs: 'post' }),
    post: () => p.manyToOne(Post),
    body: p.string(),
  },
})

export async function openMikroOrmBlog({
  dialect,
  urls,
  source,
  directory = shardMap,
}: BlogOptions): Promise<RoutedBlog> {
  const servers: Record<string, MikroORM<AbstractSqlDriver>> = {}
  for (const [name, clientUrl] of Object.entries(urls)) {
    const options = {
      clientUrl,
      entities: [User, Post, Comment],
      extensions: [shardedIds({ source })],
      pool: { max: 4 },
    }
    // An SQL MikroORM for both: the example uses no dialect-specific API of the ORM.
    servers[name] =
      dialect === 'postgres' ? await PostgresOrm.init(options) : await MariadbOrm.init(options)
  }
  const homes = await ShardHomes.open({ sharding, servers, directory })
  const sharded = shardedOrms(homes)
  const ids = (rows: { id: bigint }[]) => rows.map((row) => row.id.toString())
  const postData = (list: readonly NewPost[]) =>
    list.map((post) => ({ user: BigInt(post.userId), title: post.title }))

  return {
    orm: 'mikro-orm',
    async createUsers(emails) {
      return ids(
        await sharded.createAndFlush(
          User,
          emails.map((email) => ({ email })),
        ),
      )
    },
    async createPosts(list) {
      return ids(await sharded.createAndFlush(Post, postData(list)))
    },
    async createComments(list) {
      return ids(
        await sharded.createAndFlush(
          Comment,
          list.map((comment) => ({ post: BigInt(comment.postId), body: comment.body })),
        ),
      )
    },
    async findPost(id) {
      const em = sharded.forId(id)
      const post = await em.findOne(Post, BigInt(id))
      if (!post) return undefined
      const comments = await em.find(Comment, { post: post.id }, { orderBy: { id: 'asc' } })
      return { title: post.title, comments: comments.map((comment) => comment.body) }
    },
    async findUserByEmail(email) {
      return (await sharded.forKey(email).findOne(User, { email }))?.id.toString()
    },
    async newestPosts(limit) {
      const rows = await sharded.fanOut(
        (em, _server, shards) =>
          em
            .createQueryBuilder(Post)
            .where(sharded.inShards(shards))
            .orderBy({ id: 'desc' })
            .limit(limit)
            .getResult(),
        { orderBy: (post) => post.id, order: 'desc', limit },
      )
      return ids(rows)
    },
    async createPostsDirect(server, list) {
      const em = homes.handleOf(server).em.fork()
      const created = postData(list).map((data) => em.create(Post, data))
      await em.flush()
      return ids(created)
    },
    async close() {
      await homes.close()
      await Promise.all(Object.values(servers).map((orm) => orm.close()))
    },
  }
}
