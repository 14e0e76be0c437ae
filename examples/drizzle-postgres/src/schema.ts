/**
 * The blog of the benchmark in three key schemes, tables of the same shape (a BIGINT key, the
 * author's key, a title, an index on the author):
 * - `autoAuthors` / `autoPosts`: identity columns, the database's keys (the baseline);
 * - `authors` / `posts`: sharded IDs, authors on the shard of their email, posts on their
 *   author's (`sameShardAs` the foreign key), IDs from `ids.assign()` before the INSERT;
 * - `scopedPosts`: sharded IDs from the column's `$defaultFn`, on the shard of the scope the
 *   insert runs in (no assign step: the shard does not come from the row).
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import { shardedId } from '@shardflake/drizzle'
import { bigint, index, pgTable, text } from 'drizzle-orm/pg-core'

export const autoAuthors = pgTable('auto_authors', {
  id: bigint({ mode: 'bigint' }).primaryKey().generatedAlwaysAsIdentity(),
  email: text().notNull().unique(),
})

export const autoPosts = pgTable(
  'auto_posts',
  {
    id: bigint({ mode: 'bigint' }).primaryKey().generatedAlwaysAsIdentity(),
    authorId: bigint('author_id', { mode: 'bigint' })
      .notNull()
      .references(() => autoAuthors.id),
    title: text().notNull(),
  },
  (t) => [index('auto_posts_author').on(t.authorId)],
)

/** The logical shard the request being served writes to. */
export const requestShard = new AsyncLocalStorage<number>()

/**
 * The sharded tables. A function, so each source of the benchmark gets its own table objects:
 * `shardedIds()` binds a column to one source at a time, as an application has one.
 */
export function shardedTables() {
  const authors = pgTable('authors', {
    id: shardedId(bigint({ mode: 'bigint' }), { shardBy: 'email' }).primaryKey(),
    email: text().notNull().unique(),
  })
  const posts = pgTable(
    'posts',
    {
      id: shardedId(bigint({ mode: 'bigint' }), { sameShardAs: 'authorId' }).primaryKey(),
      authorId: bigint('author_id', { mode: 'bigint' })
        .notNull()
        .references(() => authors.id),
      title: text().notNull(),
    },
    (t) => [index('posts_author').on(t.authorId)],
  )
  const scopedPosts = pgTable(
    'scoped_posts',
    {
      id: shardedId(bigint({ mode: 'bigint' }), {
        shard: () => requestShard.getStore(),
      }).primaryKey(),
      authorId: bigint('author_id', { mode: 'bigint' })
        .notNull()
        .references(() => authors.id),
      title: text().notNull(),
    },
    (t) => [index('scoped_posts_author').on(t.authorId)],
  )
  return { authors, posts, scopedPosts }
}

/** The tables, in SQL (what drizzle-kit would create from the definitions above). */
export const schemaSql = [
  'CREATE TABLE auto_authors (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, email TEXT NOT NULL UNIQUE)',
  'CREATE TABLE auto_posts (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, author_id BIGINT NOT NULL REFERENCES auto_authors (id), title TEXT NOT NULL)',
  'CREATE INDEX auto_posts_author ON auto_posts (author_id)',
  'CREATE TABLE authors (id BIGINT PRIMARY KEY, email TEXT NOT NULL UNIQUE)',
  'CREATE TABLE posts (id BIGINT PRIMARY KEY, author_id BIGINT NOT NULL REFERENCES authors (id), title TEXT NOT NULL)',
  'CREATE INDEX posts_author ON posts (author_id)',
  'CREATE TABLE scoped_posts (id BIGINT PRIMARY KEY, author_id BIGINT NOT NULL REFERENCES authors (id), title TEXT NOT NULL)',
  'CREATE INDEX scoped_posts_author ON scoped_posts (author_id)',
]
