/**
 * Prepared inserts. Drizzle builds a prepared statement once, so a `$defaultFn` runs once, at
 * `prepare()`, and every `execute()` sends the value it made then (drizzle-orm issue 1588). A
 * sharded-ID column is always the primary key or unique (`shardedIds()` refuses it otherwise),
 * so the database refuses the second execution instead of storing the ID twice; the way that
 * works is the ID as a placeholder, each execution with its own row from `ids.assign()`.
 */
import { type Dialect, type RawDatabase, testSharding } from '@shardflake/conformance'
import { InProcessSource } from '@shardflake/core'
import { sql } from 'drizzle-orm'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type ShardedIds, shardedIds } from '../../src'
import { type BlogDb, connect } from './blog'
import { allTables, EVENTS_SHARD, freshBlogDatabase } from './fixtures'

type Row = Record<string, unknown>

export function describePreparedInserts(version: string, dialect: Dialect): void {
  const database = dialect === 'postgres' ? 'PostgreSQL' : 'MariaDB'
  describe(`Drizzle ${version} / ${database}: prepared inserts`, () => {
    const sharding = testSharding()
    const tables = allTables(dialect)
    let raw: RawDatabase
    let db: BlogDb
    let source: InProcessSource
    let ids: ShardedIds

    beforeAll(async () => {
      raw = await freshBlogDatabase(
        dialect,
        `sf_drizzle_${version.startsWith('0.') ? '045' : '1'}_${dialect.slice(0, 2)}_prepared`,
      )
      db = connect(raw)
      source = new InProcessSource({ sharding, shards: 'all' })
      ids = shardedIds(db.drizzle, { source, schema: tables })
    })

    afterAll(async () => {
      ids?.close()
      await db?.close()
      await source?.close()
      await raw?.close()
    })

    it('a prepared insert that leaves the ID to $defaultFn sends the same ID on every execute: the database refuses the second, and no ID is stored twice', async () => {
      const insert = db.prepareInsert(tables.events, { body: sql.placeholder('body') })
      await insert.execute({ body: 'prepared 1' })
      const second = await insert.execute({ body: 'prepared 2' }).catch((e: unknown) => e)
      expect(isDuplicateKey(second)).toBe(true)
      const stored = await raw.query("SELECT id, body FROM events WHERE body LIKE 'prepared %'")
      expect(stored.map((row) => row.body)).toEqual(['prepared 1'])
      expect(sharding.shardOfId(String(stored[0]?.id))).toBe(EVENTS_SHARD)
    })

    it('the ID as a placeholder and a row from ids.assign() per execute: 64 concurrent executions, 64 distinct IDs on the rule’s shard', async () => {
      const author: Row = await ids.assign(tables.authors, { email: 'prepared@example.com' })
      await db.insert(tables.authors, [author])
      const insert = db.prepareInsert(tables.posts, {
        id: sql.placeholder('id'),
        authorId: sql.placeholder('authorId'),
        title: sql.placeholder('title'),
      })
      await Promise.all(
        Array.from({ length: 64 }, async (_, i) =>
          insert.execute(
            await ids.assign(tables.posts, { authorId: author.id, title: `placeholder ${i}` }),
          ),
        ),
      )
      const stored = await raw.query(
        "SELECT id, author_id FROM posts WHERE title LIKE 'placeholder %'",
      )
      expect(stored).toHaveLength(64)
      expect(new Set(stored.map((row) => String(row.id))).size).toBe(64)
      for (const row of stored) {
        expect(String(row.author_id)).toBe(String(author.id))
        expect(sharding.shardOfId(String(row.id))).toBe(sharding.shardOfId(String(author.id)))
      }
    })
  })
}

/** True when `error` or one of its causes is the server's duplicate-key error. */
function isDuplicateKey(error: unknown): boolean {
  for (let current = error; current; current = (current as { cause?: unknown }).cause) {
    const { code, errno } = current as { code?: unknown; errno?: unknown }
    if (code === '23505' || errno === 1062) return true
  }
  return false
}
