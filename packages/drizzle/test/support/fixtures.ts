/**
 * Small tables for the tests of one behaviour, next to the conformance blog: `events`, whose rows
 * go to a fixed shard, and `notes`, whose rows go to the shard of the caller's scope. Both need no
 * row to place one, so their IDs can come from the column's `$defaultFn`.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import {
  blogSchemaSql,
  type Dialect,
  freshDatabase,
  type RawDatabase,
} from '@shardflake/conformance'
import { type MySqlTable, bigint as mysqlBigint, mysqlTable, varchar } from 'drizzle-orm/mysql-core'
import { type PgTable, bigint as pgBigint, pgTable, text } from 'drizzle-orm/pg-core'
import { shardedId } from '../../src'
import { type BlogTables, blogTables } from './blog'

/** The logical shard the request being served writes to, as an application would keep it. */
export const tenantShard = new AsyncLocalStorage<number>()

/** The fixed shard of `events`. */
export const EVENTS_SHARD = 5

export interface ScopedTables {
  readonly events: PgTable | MySqlTable
  readonly notes: PgTable | MySqlTable
}

export function scopedTables(dialect: Dialect): ScopedTables {
  const shard = () => tenantShard.getStore()
  if (dialect === 'postgres') {
    return {
      events: pgTable('events', {
        id: shardedId(pgBigint({ mode: 'bigint' }), { shard: EVENTS_SHARD }).primaryKey(),
        body: text().notNull(),
      }),
      notes: pgTable('notes', {
        id: shardedId(pgBigint({ mode: 'bigint' }), { shard }).primaryKey(),
        body: text().notNull(),
      }),
    }
  }
  return {
    events: mysqlTable('events', {
      id: shardedId(mysqlBigint({ mode: 'bigint' }), { shard: EVENTS_SHARD }).primaryKey(),
      body: varchar({ length: 200 }).notNull(),
    }),
    notes: mysqlTable('notes', {
      id: shardedId(mysqlBigint({ mode: 'bigint' }), { shard }).primaryKey(),
      body: varchar({ length: 200 }).notNull(),
    }),
  }
}

/** A fresh database with the blog's tables and `events` and `notes`. */
export async function freshBlogDatabase(dialect: Dialect, base: string): Promise<RawDatabase> {
  const raw = await freshDatabase(dialect, base)
  const text = dialect === 'postgres' ? 'TEXT' : 'VARCHAR(200)'
  for (const statement of [
    ...blogSchemaSql(dialect),
    `CREATE TABLE events (id BIGINT NOT NULL PRIMARY KEY, body ${text} NOT NULL)`,
    `CREATE TABLE notes (id BIGINT NOT NULL PRIMARY KEY, body ${text} NOT NULL)`,
  ]) {
    await raw.query(statement)
  }
  return raw
}

/** The blog's tables and the scoped ones, as one schema. */
export function allTables(dialect: Dialect): BlogTables & ScopedTables {
  return { ...blogTables(dialect), ...scopedTables(dialect) }
}
