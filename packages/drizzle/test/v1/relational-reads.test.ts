/**
 * What Drizzle 1.0's relational queries give back for sharded IDs: exact, top-level and related
 * rows alike (1.0 reads BIGINT as text inside the JSON too). On MariaDB, 1.0's relational
 * queries with `with` use LATERAL joins, which MariaDB does not have.
 */
import {
  blogSchemaSql,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import { InProcessSource } from '@shardflake/core'
import { defineRelations } from 'drizzle-orm'
import { bigint as mysqlBigint, mysqlTable, varchar } from 'drizzle-orm/mysql-core'
import { drizzle as mysqlDrizzle } from 'drizzle-orm/mysql2'
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres'
import { bigint, pgTable, text } from 'drizzle-orm/pg-core'
import mysql from 'mysql2/promise'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { shardedId, shardedIds } from '../../src'

const sharding = testSharding()

const posts = pgTable('posts', {
  id: shardedId(bigint({ mode: 'bigint' }), { shard: 3 }).primaryKey(),
  authorId: bigint('author_id', { mode: 'bigint' }).notNull(),
  title: text().notNull(),
})
const comments = pgTable('comments', {
  id: shardedId(bigint({ mode: 'string' }), { sameShardAs: 'postId' }).primaryKey(),
  postId: bigint('post_id', { mode: 'bigint' })
    .notNull()
    .references(() => posts.id),
  body: text().notNull(),
})
const relations = defineRelations({ posts, comments }, (r) => ({
  posts: { comments: r.many.comments({ from: r.posts.id, to: r.comments.postId }) },
  comments: { post: r.one.posts({ from: r.comments.postId, to: r.posts.id }) },
}))

async function freshBlog(dialect: 'postgres' | 'mysql', base: string): Promise<RawDatabase> {
  const raw = await freshDatabase(dialect, base)
  for (const statement of blogSchemaSql(dialect)) await raw.query(statement)
  await raw.query(`INSERT INTO authors (id, email) VALUES (1, 'thread@example.com')`)
  return raw
}

describe('Drizzle 1.0 / PostgreSQL: sharded IDs in relational queries', () => {
  let raw: RawDatabase
  let pool: pg.Pool
  let source: InProcessSource

  beforeAll(async () => {
    raw = await freshBlog('postgres', 'sf_drizzle_1_pg_rqb')
    pool = new pg.Pool({ connectionString: raw.url })
    source = new InProcessSource({ sharding, shards: 'all' })
  })

  afterAll(async () => {
    await source?.close()
    await pool?.end()
    await raw?.close()
  })

  it('reads a post, its comments (string IDs) and each comment’s post exactly', async () => {
    const db = pgDrizzle({ client: pool, relations })
    const ids = shardedIds(db, { source, schema: { posts, comments } })
    const post = await ids.assign(posts, { authorId: 1n, title: 'thread' })
    await db.insert(posts).values(post)
    const written = await ids.assign(
      comments,
      Array.from({ length: 10 }, (_, i) => ({ postId: post.id!, body: `comment ${i}` })),
    )
    await db.insert(comments).values(written)
    ids.close()
    const read = await db.query.posts.findFirst({
      where: { id: post.id! },
      with: { comments: { with: { post: true } } },
    })
    expect(read?.id).toBe(post.id)
    expect(new Set(read?.comments.map((comment) => comment.id))).toEqual(
      new Set(written.map((comment) => comment.id)),
    )
    for (const comment of read?.comments ?? []) expect(comment.post?.id).toBe(post.id)
    expect(new Set(written.map((comment) => sharding.shardOfId(comment.id!)))).toEqual(new Set([3]))
  })
})

describe('Drizzle 1.0 / MariaDB: relational queries', () => {
  let raw: RawDatabase

  beforeAll(async () => {
    raw = await freshBlog('mysql', 'sf_drizzle_1_my_rqb')
  })

  afterAll(() => raw?.close())

  it('refuses `with` on MariaDB (Drizzle 1.0 joins relations LATERAL, which MariaDB lacks)', async () => {
    const myPosts = mysqlTable('posts', {
      id: shardedId(mysqlBigint({ mode: 'bigint' }), { shard: 3 }).primaryKey(),
      authorId: mysqlBigint('author_id', { mode: 'bigint' }).notNull(),
      title: varchar({ length: 200 }).notNull(),
    })
    const myComments = mysqlTable('comments', {
      id: shardedId(mysqlBigint({ mode: 'bigint' }), { sameShardAs: 'postId' }).primaryKey(),
      postId: mysqlBigint('post_id', { mode: 'bigint' }).notNull(),
      body: varchar({ length: 200 }).notNull(),
    })
    const myRelations = defineRelations({ posts: myPosts, comments: myComments }, (r) => ({
      posts: { comments: r.many.comments({ from: r.posts.id, to: r.comments.postId }) },
    }))
    const pool = mysql.createPool({ uri: raw.url })
    try {
      const db = mysqlDrizzle({ client: pool, relations: myRelations })
      await expect(db.query.posts.findFirst({ with: { comments: true } })).rejects.toThrow(
        /lateral/i,
      )
    } finally {
      await pool.end()
    }
  })
})
