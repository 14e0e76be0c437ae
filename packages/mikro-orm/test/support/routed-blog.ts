/**
 * The routed conformance blog on MikroORM: one MikroORM per server (each with `shardedIds()`),
 * `ShardHomes` over them, written through `shardedOrms()`.
 */
import type { RequiredEntityData } from '@mikro-orm/core'
import type { MikroORM } from '@mikro-orm/postgresql'
import {
  type RoutedBlogThroughOrm,
  type RoutedSetupContext,
  type RoutedSuiteOptions,
  routedSources,
} from '@shardflake/conformance'
import { ShardHomes } from '@shardflake/core'
import * as mysqlSources from '@shardflake/mysql'
import * as postgresSources from '@shardflake/postgres'
import * as redisSources from '@shardflake/redis'
import { shardedIds, shardedOrms } from '../../src'
import type { BlogPost } from './blog'
import { openOrm } from './blog'
import { Author, Comment, Keyed, Post } from './entities-legacy'

/** The blog on three MikroORM instances routed by `shardedOrms()`. */
export async function routedBlogOnMikroOrm(
  context: RoutedSetupContext,
): Promise<RoutedBlogThroughOrm> {
  const { dialect, sharding, directory, urls, source } = context
  const counts: Record<string, number> = {}
  const servers: Record<string, MikroORM> = {}
  for (const [name, url] of Object.entries(urls)) {
    counts[name] = 0
    // (The MariaDB instance's em is an SQL EntityManager too.)
    servers[name] = (await openOrm(
      dialect,
      url,
      [Author, Post, Comment, Keyed],
      [shardedIds({ source })],
      {
        debug: ['query'],
        logger: () => {
          counts[name]!++
        },
        pool: { max: 4 },
      },
    )) as MikroORM
  }
  const homes = await ShardHomes.open({ sharding, servers, directory })
  const sharded = shardedOrms(homes)
  const post = (fields: { authorId: unknown; title: string }) =>
    ({ author: BigInt(fields.authorId as bigint), title: fields.title }) as RequiredEntityData<Post>
  return {
    idType: 'bigint',
    async createAuthor(email) {
      const [author] = await sharded.createAndFlush(Author, [{ email }])
      return author!.id
    },
    async createPosts(list) {
      return (await sharded.createAndFlush(Post, list.map(post))).map((created) => created.id)
    },
    async createPostWithComments(fields, bodies) {
      const [created] = await sharded.createAndFlush(Post, [
        { ...post(fields), comments: bodies.map((body) => ({ body })) } as RequiredEntityData<Post>,
      ])
      return {
        postId: created!.id,
        commentIds: created!.comments.getItems().map((comment) => comment.id),
      }
    },
    async createKeyed(shardKey) {
      const [created] = await sharded.createAndFlush(Keyed, [{ shardKey }])
      return created!.id
    },
    async findPostWithComments(postId) {
      const found = await sharded
        .forId(BigInt(postId))
        .findOne(Post, BigInt(postId), { populate: ['comments'] })
      if (!found) return undefined
      return { title: found.title, comments: found.comments.getItems().map((c) => c.body) }
    },
    async createPostsInTransaction(list) {
      await sharded.transactional({ id: BigInt(list[0]!.authorId) }, async (em) => {
        for (const fields of list) {
          em.create(Post, post(fields))
          await em.flush()
        }
      })
    },
    async newestPosts(limit) {
      const rows = await sharded.fanOut(
        (em, _server, shards) =>
          em
            .createQueryBuilder(Post)
            .where(sharded.inShards(shards))
            .orderBy({ id: 'desc' })
            .limit(limit)
            .getResult() as Promise<BlogPost[]>,
        { orderBy: (row) => row.id, order: 'desc', limit },
      )
      return rows.map((row) => row.id)
    },
    statementsSent() {
      return { ...counts }
    },
    async close() {
      await homes.close()
      await Promise.all(Object.values(servers).map((orm) => orm.close(true)))
    },
  }
}

/** The routed suite's options for MikroORM on a dialect, with every source. */
export function routedOptions(dialect: RoutedSuiteOptions['dialect']): RoutedSuiteOptions {
  return {
    dialect,
    sources: routedSources(dialect, {
      postgres: postgresSources,
      mysql: mysqlSources,
      redis: redisSources,
    }),
    setup: routedBlogOnMikroOrm,
  }
}
