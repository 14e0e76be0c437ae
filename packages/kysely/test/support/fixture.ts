/**
 * A fresh database with the blog's tables and two more, Kysely on it with the plugin, and the
 * source counting its calls; every check reads the rows back through raw SQL.
 */
import {
  blogSchemaSql,
  CountingSource,
  type Dialect,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import type { IdSource, Sharding } from '@shardflake/core'
import { type ColumnType, Kysely, type Dialect as KyselyDialect, type KyselyPlugin } from 'kysely'
import { type ShardedId, type ShardedIdsPlugin, shardedIds } from '../../src'
import { type BlogDatabase, blogDialect } from './blog'

export interface Database extends BlogDatabase {
  /**
   * Key column `event_id`, `shardBy: 'tenant_id'` (a plain integer key). Its key takes a `number`
   * on insert, as from JavaScript callers, so the tests can give an unsafe one.
   */
  events: {
    event_id: ColumnType<string, bigint | string | number | undefined, never>
    tenant_id: number | string
    note: string | null
  }
  /** `{ shard: 5 }`: every row on shard 5, so `defaultValues()` can be placed. */
  counters: { id: ShardedId; label: ColumnType<string, string | undefined, string> }
}

export const FIXED_SHARD = 5

export function extraTablesSql(dialect: Dialect): string[] {
  const text = dialect === 'postgres' ? 'TEXT' : 'VARCHAR(200)'
  return [
    'DROP TABLE IF EXISTS events',
    'DROP TABLE IF EXISTS counters',
    `CREATE TABLE events (event_id BIGINT NOT NULL PRIMARY KEY, tenant_id BIGINT NOT NULL, note ${text} NULL)`,
    `CREATE TABLE counters (id BIGINT NOT NULL PRIMARY KEY, label VARCHAR(20) NOT NULL DEFAULT 'none')`,
  ]
}

/** The plugin with the fixture's rules. */
export function fixtureIds(source: IdSource): ShardedIdsPlugin<Database> {
  return shardedIds<Database>({
    source,
    tables: {
      authors: { shardBy: 'email' },
      posts: { sameShardAs: 'author_id' },
      comments: { sameShardAs: 'post_id' },
      keyed: { shardBy: 'shard_key' },
      events: { column: 'event_id', shardBy: 'tenant_id' },
      counters: { shard: FIXED_SHARD },
    },
  })
}

export interface Fixture {
  readonly dialect: Dialect
  readonly raw: RawDatabase
  readonly sharding: Sharding
  /** The source the plugin was given: counts calls and IDs. */
  readonly counting: CountingSource
  readonly ids: ShardedIdsPlugin<Database>
  /** Kysely with the plugin and its dialect. */
  readonly db: Kysely<Database>
  /** A placeholder in the dialect: `$1` or `?`. */
  p(index: number): string
  /** The rows of `sql`, read raw (BIGINT as decimal strings). */
  rows(sql: string, params?: readonly unknown[]): Promise<Record<string, unknown>[]>
  /** The shard an ID decodes to. */
  shardOf(id: unknown): number
  /**
   * Another Kysely on the same database, with `plugins`, and the dialect of `dialectOf` (a
   * plugin) around the database's, or the database's alone (`undefined`).
   */
  open(options: {
    plugins: KyselyPlugin[]
    dialectOf: { dialect(inner: KyselyDialect): KyselyDialect } | undefined
  }): Kysely<Database>
  close(): Promise<void>
}

/** Opens a fixture; `makeSource` gets the fixture's sharding (64 logical shards). */
export async function openFixture(
  dialect: Dialect,
  database: string,
  makeSource: (sharding: Sharding) => IdSource,
  { wrapDialect = true } = {},
): Promise<Fixture> {
  const sharding = testSharding()
  const raw = await freshDatabase(dialect, database)
  for (const sql of [...blogSchemaSql(dialect), ...extraTablesSql(dialect)]) await raw.query(sql)
  const inner = makeSource(sharding)
  const counting = new CountingSource(inner)
  const ids = fixtureIds(counting)
  const opened: Kysely<Database>[] = []
  const open: Fixture['open'] = ({ plugins, dialectOf }) => {
    const base = blogDialect(dialect, raw.url)
    const db = new Kysely<Database>({
      dialect: dialectOf ? dialectOf.dialect(base) : base,
      plugins,
    })
    opened.push(db)
    return db
  }
  const db = open({ plugins: [ids], dialectOf: wrapDialect ? ids : undefined })
  return {
    dialect,
    raw,
    sharding,
    counting,
    ids,
    db,
    open,
    p: (index) => (dialect === 'postgres' ? `$${index}` : '?'),
    rows: (sql, params = []) => raw.query(sql, params),
    shardOf: (id) => sharding.shardOfId(String(id)),
    async close() {
      for (const each of opened) await each.destroy()
      await inner.close()
      await raw.close()
    },
  }
}

/** The error `promise` rejects with (fails the test when it resolves). */
export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected the call to be refused, but it succeeded')
    },
    (error: unknown) => error,
  )
}
