/**
 * The same two tables twice: with shardflake keys (`posts` on its author's shard) and with
 * BIGSERIAL keys, and the plugin's rules for the first pair.
 */
import type { ShardedId, ShardedTables } from '@shardflake/kysely'
import type { Generated } from 'kysely'

export interface Database {
  authors: { id: ShardedId; email: string }
  posts: { id: ShardedId; author_id: string; title: string }
  auto_authors: { id: Generated<string>; email: string }
  auto_posts: { id: Generated<string>; author_id: string; title: string }
}

export const tables: ShardedTables<Database> = {
  authors: { shardBy: 'email' },
  posts: { sameShardAs: 'author_id' }, // the author's shard, read from its ID
}

export const schema = [
  'CREATE TABLE authors (id BIGINT PRIMARY KEY, email TEXT NOT NULL UNIQUE)',
  'CREATE TABLE posts (id BIGINT PRIMARY KEY, author_id BIGINT NOT NULL REFERENCES authors (id), title TEXT NOT NULL)',
  'CREATE TABLE auto_authors (id BIGSERIAL PRIMARY KEY, email TEXT NOT NULL UNIQUE)',
  'CREATE TABLE auto_posts (id BIGSERIAL PRIMARY KEY, author_id BIGINT NOT NULL REFERENCES auto_authors (id), title TEXT NOT NULL)',
]
