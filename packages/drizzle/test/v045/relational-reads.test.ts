/**
 * What Drizzle 0.45's relational queries (`db.query.*.findFirst({ with })`) give back for sharded
 * IDs. Top-level rows are exact. Related rows come back through JSON built in SQL; on
 * PostgreSQL node-postgres parses it with `JSON.parse`, so every 64-bit value in them is rounded
 * to the nearest double (drizzle-orm issue 5760, fixed in 1.0): the IDs of related rows are wrong
 * unless JSON is parsed keeping big integers as text (the recipe the README gives). On
 * MySQL/MariaDB a pool with `supportBigNumbers` and `bigNumberStrings` (which `shardedIds()`
 * requires on 0.45) parses them exactly.
 */
import {
  blogSchemaSql,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import { InProcessSource } from '@shardflake/core'
import { eq, relations } from 'drizzle-orm'
import { bigint as mysqlBigint, mysqlTable, varchar } from 'drizzle-orm/mysql-core'
import { drizzle as mysqlDrizzle } from 'drizzle-orm/mysql2'
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres'
import { bigint, pgTable, text } from 'drizzle-orm/pg-core'
import mysql from 'mysql2/promise'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { shardedId, shardedIds } from '../../src'

const sharding = testSharding()

const pgPosts = pgTable('posts', {
  id: shardedId(bigint({ mode: 'bigint' }), { shard: 3 }).primaryKey(),
  authorId: bigint('author_id', { mode: 'bigint' }).notNull(),
  title: text().notNull(),
})
const pgComments = pgTable('comments', {
  id: shardedId(bigint({ mode: 'bigint' }), { sameShardAs: 'postId' }).primaryKey(),
  postId: bigint('post_id', { mode: 'bigint' })
    .notNull()
    .references(() => pgPosts.id),
  body: text().notNull(),
})
const pgSchema = {
  posts: pgPosts,
  comments: pgComments,
  postRelations: relations(pgPosts, ({ many }) => ({ comments: many(pgComments) })),
  commentRelations: relations(pgComments, ({ one }) => ({
    post: one(pgPosts, { fields: [pgComments.postId], references: [pgPosts.id] }),
  })),
}

const myPosts = mysqlTable('posts', {
  id: shardedId(mysqlBigint({ mode: 'bigint' }), { shard: 3 }).primaryKey(),
  authorId: mysqlBigint('author_id', { mode: 'bigint' }).notNull(),
  title: varchar({ length: 200 }).notNull(),
})
const myComments = mysqlTable('comments', {
  id: shardedId(mysqlBigint({ mode: 'bigint' }), { sameShardAs: 'postId' }).primaryKey(),
  postId: mysqlBigint('post_id', { mode: 'bigint' })
    .notNull()
    .references(() => myPosts.id),
  body: varchar({ length: 200 }).notNull(),
})
const mySchema = {
  posts: myPosts,
  comments: myComments,
  postRelations: relations(myPosts, ({ many }) => ({ comments: many(myComments) })),
  commentRelations: relations(myComments, ({ one }) => ({
    post: one(myPosts, { fields: [myComments.postId], references: [myPosts.id] }),
  })),
}

/** A fresh blog database with an author row (the posts' foreign key needs one). */
async function freshBlog(dialect: 'postgres' | 'mysql', base: string): Promise<RawDatabase> {
  const raw = await freshDatabase(dialect, base)
  for (const statement of blogSchemaSql(dialect)) await raw.query(statement)
  await raw.query(`INSERT INTO authors (id, email) VALUES (1, 'thread@example.com')`)
  return raw
}

describe('Drizzle 0.45 / PostgreSQL: sharded IDs in relational queries', () => {
  let raw: RawDatabase
  let pool: pg.Pool
  let source: InProcessSource
  let postId: bigint
  let commentIds: bigint[]
  const exactJson = (text: string): unknown =>
    JSON.parse(text, (_key, value, context?: { source?: string }) =>
      Number.isInteger(value) && !Number.isSafeInteger(value) ? context?.source : value,
    )
  const read = () =>
    pgDrizzle({ client: pool, schema: pgSchema }).query.posts.findFirst({
      where: eq(pgPosts.id, postId),
      with: { comments: true },
    })

  beforeAll(async () => {
    raw = await freshBlog('postgres', 'sf_drizzle_045_pg_rqb')
    pool = new pg.Pool({ connectionString: raw.url })
    source = new InProcessSource({ sharding, shards: 'all' })
    const db = pgDrizzle({ client: pool, schema: pgSchema })
    const ids = shardedIds(db, { source, schema: pgSchema })
    const [post] = await db
      .insert(pgPosts)
      .values(await ids.assign(pgPosts, [{ authorId: 1n, title: 'thread' }]))
      .returning()
    postId = post!.id
    const comments = await ids.assign(
      pgComments,
      Array.from({ length: 10 }, (_, i) => ({ postId, body: `comment ${i}` })),
    )
    await db.insert(pgComments).values(comments)
    commentIds = comments.map((comment) => comment.id!)
    ids.close()
  })

  afterAll(async () => {
    pg.types.setTypeParser(pg.types.builtins.JSON, JSON.parse)
    await source?.close()
    await pool?.end()
    await raw?.close()
  })

  it("reads the post's own ID exactly, and its comments' IDs rounded to the nearest double, so ten comments share IDs (drizzle-orm issue 5760)", async () => {
    const post = await read()
    expect(post?.id).toBe(postId)
    const nested = (post?.comments ?? []).map((comment) => comment.id)
    const sorted = (ids: bigint[]) => ids.map(String).sort()
    expect(sorted(nested)).toEqual(sorted(commentIds.map((id) => BigInt(Number(id)))))
    expect(new Set(commentIds).size).toBe(10)
    expect(new Set(nested).size).toBeLessThan(10)
  })

  it('reads them exactly when node-postgres parses JSON keeping big integers as text', async () => {
    pg.types.setTypeParser(pg.types.builtins.JSON, exactJson)
    const post = await read()
    expect(new Set((post?.comments ?? []).map((comment) => comment.id))).toEqual(
      new Set(commentIds),
    )
  })
})

describe('Drizzle 0.45 / MariaDB: sharded IDs in relational queries', () => {
  let raw: RawDatabase

  beforeAll(async () => {
    raw = await freshBlog('mysql', 'sf_drizzle_045_my_rqb')
  })

  afterAll(() => raw?.close())

  it('reads related rows exactly through a pool with supportBigNumbers and bigNumberStrings', async () => {
    const pool = mysql.createPool({ uri: raw.url, supportBigNumbers: true, bigNumberStrings: true })
    const source = new InProcessSource({ sharding, shards: 'all' })
    try {
      // MariaDB has no LATERAL joins: Drizzle's `planetscale` mode reads relations without them.
      const db = mysqlDrizzle({ client: pool, schema: mySchema, mode: 'planetscale' })
      const ids = shardedIds(db, { source, schema: mySchema })
      const post = await ids.assign(myPosts, { authorId: 1n, title: 'thread' })
      await db.insert(myPosts).values(post)
      const comments = await ids.assign(
        myComments,
        Array.from({ length: 10 }, (_, i) => ({ postId: post.id!, body: `comment ${i}` })),
      )
      await db.insert(myComments).values(comments)
      ids.close()
      const read = await db.query.posts.findFirst({
        where: eq(myPosts.id, post.id!),
        with: { comments: true },
      })
      expect(read?.id).toBe(post.id)
      expect(new Set((read?.comments ?? []).map((comment) => comment.id))).toEqual(
        new Set(comments.map((comment) => comment.id)),
      )
    } finally {
      await source.close()
      await pool.end()
    }
  })
})
