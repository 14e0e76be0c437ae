/**
 * The blog through TypeORM: one DataSource per server, each with `shardedIds()`, routed by
 * `shardedDataSources()`. Entities are `EntitySchema`s (`shardedIdColumn`), so Node runs this
 * file as it is (decorators would need a build step).
 */
import { ShardHomes } from '@shardflake/core'
import { shardedDataSources, shardedIdColumn, shardedIds } from '@shardflake/typeorm'
import { DataSource, EntitySchema } from 'typeorm'
import type { BlogOptions, NewPost, RoutedBlog } from './blog.ts'
import { sharding, shardMap } from './servers.ts'

interface User {
  id?: string
  email: string
}
interface Post {
  id?: string
  userId: string
  title: string
}
interface Comment {
  id?: string
  postId: string
  body: string
}

const UserSchema = new EntitySchema<User>({
  name: 'User',
  tableName: 'users',
  columns: {
    id: shardedIdColumn<User>({ shardBy: 'email' }),
    email: { type: String },
  },
})
const PostSchema = new EntitySchema<Post>({
  name: 'Post',
  tableName: 'posts',
  columns: {
    // On its user's shard, read from the user's ID in user_id.
    id: shardedIdColumn<Post>({ sameShardAs: 'userId' }),
    userId: { type: 'bigint', name: 'user_id' },
    title: { type: String },
  },
})
const CommentSchema = new EntitySchema<Comment>({
  name: 'Comment',
  tableName: 'comments',
  columns: {
    id: shardedIdColumn<Comment>({ sameShardAs: 'postId' }),
    postId: { type: 'bigint', name: 'post_id' },
    body: { type: String },
  },
})

export async function openTypeormBlog({
  dialect,
  urls,
  source,
  directory = shardMap,
}: BlogOptions): Promise<RoutedBlog> {
  const servers: Record<string, DataSource> = {}
  for (const [name, url] of Object.entries(urls)) {
    const entities = [UserSchema, PostSchema, CommentSchema]
    const dataSource = new DataSource(
      dialect === 'postgres'
        ? { type: 'postgres', url, entities, extra: { max: 4 } }
        : { type: 'mariadb', url, entities, extra: { connectionLimit: 4 } },
    )
    shardedIds(dataSource, { source })
    servers[name] = await dataSource.initialize()
  }
  const homes = await ShardHomes.open({ sharding, servers, directory })
  const sharded = shardedDataSources(homes)
  const ids = (rows: { id?: string }[]) => rows.map((row) => String(row.id))
  const posts = (list: readonly NewPost[]): Post[] => list.map((post) => ({ ...post }))

  return {
    orm: 'typeorm',
    async createUsers(emails) {
      return ids(
        await sharded.save(
          UserSchema,
          emails.map((email): User => ({ email })),
        ),
      )
    },
    async createPosts(list) {
      return ids(await sharded.save(PostSchema, posts(list)))
    },
    async createComments(list) {
      return ids(
        await sharded.save(
          CommentSchema,
          list.map((comment): Comment => ({ ...comment })),
        ),
      )
    },
    async findPost(id) {
      const server = sharded.forId(id)
      const post = await server.getRepository(PostSchema).findOneBy({ id })
      if (!post) return undefined
      const comments = await server
        .getRepository(CommentSchema)
        .find({ where: { postId: id }, order: { id: 'ASC' } })
      return { title: post.title, comments: comments.map((comment) => comment.body) }
    },
    async findUserByEmail(email) {
      const user = await sharded.forKey(email).getRepository(UserSchema).findOneBy({ email })
      return user?.id
    },
    async newestPosts(limit) {
      const rows = await sharded.fanOut(
        (dataSource, _server, shards) =>
          dataSource.getRepository(PostSchema).find({
            where: { id: sharded.inShards(shards) },
            order: { id: 'DESC' },
            take: limit,
          }),
        { orderBy: (post) => post.id!, order: 'desc', limit },
      )
      return ids(rows)
    },
    async createPostsDirect(server, list) {
      return ids(await homes.handleOf(server).manager.save(PostSchema, posts(list)))
    },
    async close() {
      await homes.close()
      await Promise.all(Object.values(servers).map((dataSource) => dataSource.destroy()))
    },
  }
}
