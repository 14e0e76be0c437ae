/**
 * The routed conformance blog on Drizzle: one Drizzle database per server, `ShardHomes` over them,
 * written through `shardedDatabases()`. Shared by both Drizzle versions (the 1.0 project resolves
 * `drizzle-orm` to the 1.0 install).
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
import { desc, eq, type Logger } from 'drizzle-orm'
import type { MySqlTable } from 'drizzle-orm/mysql-core'
import { drizzle as mysqlDrizzle } from 'drizzle-orm/mysql2'
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres'
import type { PgTable } from 'drizzle-orm/pg-core'
import mysql from 'mysql2/promise'
import pg from 'pg'
import { type ShardedDatabases, shardedDatabases, shardedIds } from '../../src'
import { blogTables } from './blog'

type Row = Record<string, unknown>

/** Counts the statements Drizzle sends through one database. */
class CountingLogger implements Logger {
  count = 0
  logQuery(): void {
    this.count++
  }
}

/**
 * The few builder calls the blog makes, typed loosely: the tables are PostgreSQL or MySQL ones,
 * chosen at run time, and so are the databases.
 */
interface LooseDb {
  insert(table: unknown): { values(rows: Row | Row[]): PromiseLike<unknown> }
  select(): {
    from(table: unknown): {
      where(condition: unknown): PromiseLike<Row[]> & {
        orderBy(order: unknown): { limit(n: number): PromiseLike<Row[]> }
      }
    }
  }
  transaction<R>(run: (tx: LooseDb) => Promise<R>): Promise<R>
}

/** One Drizzle database on a server's URL, the pool to close it, and its statement counter. */
function open(dialect: RoutedSetupContext['dialect'], url: string) {
  const logger = new CountingLogger()
  if (dialect === 'postgres') {
    const pool = new pg.Pool({ connectionString: url, max: 4 })
    pool.on('error', () => undefined) // an idle connection ended by the server
    return { db: pgDrizzle({ client: pool, logger }), logger, close: () => pool.end() }
  }
  const pool = mysql.createPool({
    uri: url,
    connectionLimit: 4,
    supportBigNumbers: true,
    bigNumberStrings: true,
  })
  return { db: mysqlDrizzle({ client: pool, logger }), logger, close: () => pool.end() }
}

/** The blog on three Drizzle databases routed by `shardedDatabases()`. */
export async function routedBlogOnDrizzle(
  context: RoutedSetupContext,
): Promise<RoutedBlogThroughOrm> {
  const { dialect, sharding, directory, urls, source } = context
  const tables = blogTables(dialect)
  const { authors, posts, comments, keyed } = tables
  const opened = Object.entries(urls).map(([name, url]) => ({ name, ...open(dialect, url) }))
  const servers = Object.fromEntries(opened.map(({ name, db }) => [name, db as object]))
  const ids = shardedIds(opened[0]!.db, { source, schema: { authors, posts, comments, keyed } })
  const homes = await ShardHomes.open({ sharding, servers, directory })
  const sharded: ShardedDatabases<object> = shardedDatabases(homes, ids)
  const loose = (db: object) => db as unknown as LooseDb
  const postsTable = posts as PgTable | MySqlTable
  const postRow = (fields: { authorId: OrmId; title: string }): Row => ({
    authorId: BigInt(fields.authorId),
    title: fields.title,
  })
  const id = (row: Row) => row.id as OrmId
  return {
    idType: tables.idType,
    async createAuthor(email) {
      return id(await sharded.insert(authors, { email }))
    },
    async createPosts(list) {
      return (await sharded.insert(postsTable, list.map(postRow))).map(id)
    },
    async createPostWithComments(fields, bodies) {
      return sharded.transaction({ id: fields.authorId }, async (tx) => {
        const post = await ids.assign(postsTable, postRow(fields))
        await loose(tx).insert(posts).values(post)
        const children = await ids.assign(
          comments,
          bodies.map((body) => ({ postId: post.id, body })),
        )
        await loose(tx).insert(comments).values(children)
        return { postId: id(post), commentIds: children.map(id) }
      })
    },
    async createKeyed(shardKey) {
      return id(await sharded.insert(keyed, { shardKey }))
    },
    async findPostWithComments(postId) {
      const db = loose(sharded.forId(postId))
      const [post] = await db
        .select()
        .from(posts)
        .where(eq(tables.postId, BigInt(postId)))
      if (!post) return undefined
      const found = await db
        .select()
        .from(comments)
        .where(eq(tables.commentPostId, BigInt(postId)))
      return { title: post.title as string, comments: found.map((c) => c.body as string) }
    },
    async createPostsInTransaction(list) {
      await sharded.transaction({ id: list[0]!.authorId }, async (tx) => {
        for (const fields of list) {
          await loose(tx)
            .insert(posts)
            .values(await ids.assign(postsTable, postRow(fields)))
        }
      })
    },
    async newestPosts(limit) {
      const rows = await sharded.fanOut(
        async (db, _server, shards) =>
          await loose(db)
            .select()
            .from(posts)
            .where(sharded.inShards(tables.postId, shards))
            .orderBy(desc(tables.postId))
            .limit(limit),
        { orderBy: (row) => row.id as bigint, order: 'desc', limit },
      )
      return rows.map(id)
    },
    statementsSent() {
      return Object.fromEntries(opened.map(({ name, logger }) => [name, logger.count]))
    },
    async close() {
      ids.close()
      await homes.close()
      await Promise.all(opened.map(({ close }) => close()))
    },
  }
}

/** The routed suite's options for Drizzle on a dialect, with every source. */
export function routedOptions(dialect: RoutedSuiteOptions['dialect']): RoutedSuiteOptions {
  return {
    dialect,
    sources: routedSources(dialect, {
      postgres: postgresSources,
      mysql: mysqlSources,
      redis: redisSources,
    }),
    setup: routedBlogOnDrizzle,
  }
}
