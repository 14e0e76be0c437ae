/**
 * The routed conformance blog on Kysely: one Kysely per server (each with the blog's
 * `shardedIds()` plugin and its dialect), `ShardHomes` over them, written through
 * `shardedKysely()`. IDs come back by `RETURNING` on PostgreSQL; on MariaDB by `insertId` for one
 * row and `ids.assign()` first for several.
 */
import {
  type OrmId,
  type RoutedBlogThroughOrm,
  type RoutedSetupContext,
  type RoutedSuiteOptions,
  routedSources,
} from '@shardflake/conformance'
import { ShardHomes } from '@shardflake/core'
import * as mysqlSources from '@shardflake/mysql'
import * as postgresSources from '@shardflake/postgres'
import * as redisSources from '@shardflake/redis'
import { type Insertable, Kysely, type Transaction } from 'kysely'
import { shardedKysely } from '../../src'
import { type BlogDatabase, blogDialect, blogIds } from './blog'

/** The blog on one Kysely per server, routed by `shardedKysely()`. */
export async function routedBlogOnKysely(
  context: RoutedSetupContext,
): Promise<RoutedBlogThroughOrm> {
  const { dialect, sharding, directory, urls, source } = context
  const ids = blogIds(source)
  const sent: Record<string, number> = {}
  const servers: Record<string, Kysely<BlogDatabase>> = {}
  for (const [name, url] of Object.entries(urls)) {
    sent[name] = 0
    servers[name] = new Kysely<BlogDatabase>({
      dialect: ids.dialect(blogDialect(dialect, url)),
      plugins: [ids],
      log: (event) => {
        sent[name] = sent[name]! + (event.level === 'query' || event.level === 'error' ? 1 : 0)
      },
    })
  }
  const homes = await ShardHomes.open({ sharding, servers, directory })
  const sharded = shardedKysely(homes)
  const returning = dialect === 'postgres'

  /** Inserts posts in one routed INSERT; their IDs in order. */
  async function insertPosts(rows: Insertable<BlogDatabase['posts']>[]): Promise<string[]> {
    if (returning) {
      const inserted = await sharded.insertInto('posts').values(rows).returning('id').execute()
      return inserted.map((row) => String(row.id))
    }
    const assigned = await ids.assign('posts', rows)
    await sharded.insertInto('posts').values(assigned).execute()
    return assigned.map((row) => String(row.id))
  }

  /** Inserts one row through a transaction of one server; its ID. */
  async function insertOne<T extends 'posts' | 'comments'>(
    trx: Transaction<BlogDatabase>,
    table: T,
    row: Insertable<BlogDatabase[T]>,
  ): Promise<string> {
    if (returning) {
      const inserted = await trx
        .insertInto(table)
        .values(row)
        .returning('id')
        .executeTakeFirstOrThrow()
      return String(inserted.id)
    }
    const result = await trx.insertInto(table).values(row).executeTakeFirstOrThrow()
    return String(result.insertId)
  }

  return {
    idType: 'string',
    async createAuthor(email) {
      if (returning) {
        const row = await sharded
          .insertInto('authors')
          .values({ email })
          .returning('id')
          .executeTakeFirstOrThrow()
        return row.id
      }
      const result = await sharded.insertInto('authors').values({ email }).executeTakeFirstOrThrow()
      return String(result.insertId)
    },
    createPosts: (list) =>
      insertPosts(list.map(({ authorId, title }) => ({ author_id: String(authorId), title }))),
    createPostWithComments: ({ authorId, title }, bodies) =>
      sharded.transaction({ id: authorId }).execute(async (trx) => {
        const postId = await insertOne(trx, 'posts', { author_id: String(authorId), title })
        const commentIds: string[] = []
        for (const body of bodies) {
          commentIds.push(await insertOne(trx, 'comments', { post_id: postId, body }))
        }
        return { postId, commentIds }
      }),
    async createKeyed(shardKey) {
      if (returning) {
        const row = await sharded
          .insertInto('keyed')
          .values({ shard_key: shardKey })
          .returning('id')
          .executeTakeFirstOrThrow()
        return row.id
      }
      const result = await sharded
        .insertInto('keyed')
        .values({ shard_key: shardKey })
        .executeTakeFirstOrThrow()
      return String(result.insertId)
    },
    async findPostWithComments(postId: OrmId) {
      const db = sharded.forId(postId)
      const post = await db
        .selectFrom('posts')
        .select('title')
        .where('id', '=', String(postId))
        .executeTakeFirst()
      if (!post) return undefined
      const comments = await db
        .selectFrom('comments')
        .select('body')
        .where('post_id', '=', String(postId))
        .execute()
      return { title: post.title, comments: comments.map((c) => c.body) }
    },
    async createPostsInTransaction(list) {
      await sharded.transaction({ id: list[0]!.authorId }).execute(async (trx) => {
        for (const { authorId, title } of list) {
          await trx
            .insertInto('posts')
            .values({ author_id: String(authorId), title })
            .execute()
        }
      })
    },
    async newestPosts(limit) {
      const rows = await sharded.fanOut(
        (db, _server, shards) =>
          db
            .selectFrom('posts')
            .select('id')
            .where(sharded.inShards('id', shards))
            .orderBy('id', 'desc')
            .limit(limit)
            .execute(),
        { orderBy: (row) => String(row.id), order: 'desc', limit },
      )
      return rows.map((row) => String(row.id))
    },
    statementsSent: () => ({ ...sent }),
    async close() {
      await homes.close()
      await Promise.all(Object.values(servers).map((db) => db.destroy()))
    },
  }
}

/** The routed suite's options for Kysely on a dialect, with every source. */
export function routedOptions(dialect: RoutedSuiteOptions['dialect']): RoutedSuiteOptions {
  return {
    dialect,
    sources: routedSources(dialect, {
      postgres: postgresSources,
      mysql: mysqlSources,
      redis: redisSources,
    }),
    setup: routedBlogOnKysely,
  }
}
