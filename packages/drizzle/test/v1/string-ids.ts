/**
 * The blog's tables with `bigint({ mode: 'string' })` keys and foreign keys, which Drizzle 1.0
 * added: rows carry IDs as decimal strings.
 */
import type { Dialect } from '@shardflake/conformance'
import { int, bigint as mysqlBigint, mysqlTable, varchar } from 'drizzle-orm/mysql-core'
import { integer, bigint as pgBigint, pgTable, text } from 'drizzle-orm/pg-core'
import { shardedId } from '../../src'
import { type BlogTables, blogRules } from '../support/blog'

export function stringBlogTables(dialect: Dialect): BlogTables {
  const rules = blogRules()
  if (dialect === 'postgres') {
    const id = (name?: string) => pgBigint(name ?? 'id', { mode: 'string' })
    const authors = pgTable('authors', {
      id: shardedId(id(), rules.author).primaryKey(),
      email: text().notNull().unique(),
    })
    const posts = pgTable('posts', {
      id: shardedId(id(), rules.post).primaryKey(),
      authorId: id('author_id')
        .notNull()
        .references(() => authors.id),
      title: text().notNull(),
    })
    const comments = pgTable('comments', {
      id: shardedId(id(), rules.comment).primaryKey(),
      postId: id('post_id')
        .notNull()
        .references(() => posts.id),
      body: text().notNull(),
    })
    const keyed = pgTable('keyed', {
      id: shardedId(id(), rules.keyed).primaryKey(),
      shardKey: text('shard_key'),
    })
    const tagged = pgTable('tagged', {
      id: shardedId(id(), rules.tagged).primaryKey(),
      tenant: text().notNull(),
      lshard: integer().notNull(),
    })
    return {
      dialect,
      idType: 'string',
      authors,
      posts,
      comments,
      keyed,
      tagged,
      postId: posts.id,
      commentPostId: comments.postId,
    }
  }
  const id = (name?: string) => mysqlBigint(name ?? 'id', { mode: 'string' })
  const authors = mysqlTable('authors', {
    id: shardedId(id(), rules.author).primaryKey(),
    email: varchar({ length: 200 }).notNull().unique(),
  })
  const posts = mysqlTable('posts', {
    id: shardedId(id(), rules.post).primaryKey(),
    authorId: id('author_id')
      .notNull()
      .references(() => authors.id),
    title: varchar({ length: 200 }).notNull(),
  })
  const comments = mysqlTable('comments', {
    id: shardedId(id(), rules.comment).primaryKey(),
    postId: id('post_id')
      .notNull()
      .references(() => posts.id),
    body: varchar({ length: 200 }).notNull(),
  })
  const keyed = mysqlTable('keyed', {
    id: shardedId(id(), rules.keyed).primaryKey(),
    shardKey: varchar('shard_key', { length: 200 }),
  })
  const tagged = mysqlTable('tagged', {
    id: shardedId(id(), rules.tagged).primaryKey(),
    tenant: varchar({ length: 200 }).notNull(),
    lshard: int().notNull(),
  })
  return {
    dialect,
    idType: 'string',
    authors,
    posts,
    comments,
    keyed,
    tagged,
    postId: posts.id,
    commentPostId: comments.postId,
  }
}
