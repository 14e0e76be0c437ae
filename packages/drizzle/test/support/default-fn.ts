/**
 * Rows that reach `.values()` without an ID: the column's `$defaultFn` serves a fixed or scoped
 * shard from a synchronous source, and refuses, typed and before anything is written, what it
 * cannot honour (a per-row rule, an asynchronous source, a column without a source).
 */
import {
  asAsync,
  CountingSource,
  type Dialect,
  findError,
  type RawDatabase,
  testLeasedSharding,
  testSharding,
} from '@shardflake/conformance'
import {
  ConfigurationError,
  InProcessSource,
  LeasedSource,
  MemoryLeaseRegistry,
  MissingShardKeyError,
} from '@shardflake/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type ShardedIds, shardedIds } from '../../src'
import { type BlogDb, connect } from './blog'

type Row = Record<string, unknown>

import { allTables, EVENTS_SHARD, freshBlogDatabase, scopedTables, tenantShard } from './fixtures'

export function describeDefaultFn(version: string, dialect: Dialect): void {
  const database = dialect === 'postgres' ? 'PostgreSQL' : 'MariaDB'
  describe(`Drizzle ${version} / ${database}: IDs from the column's $defaultFn`, () => {
    const sharding = testSharding()
    const tables = allTables(dialect)
    let raw: RawDatabase
    let db: BlogDb
    let inner: InProcessSource
    let source: CountingSource
    let ids: ShardedIds
    const count = async (sql: string) => Number(Object.values((await raw.query(sql))[0] ?? {})[0])

    beforeAll(async () => {
      raw = await freshBlogDatabase(
        dialect,
        `sf_drizzle_${version.startsWith('0.') ? '045' : '1'}_${dialect.slice(0, 2)}_default`,
      )
      db = connect(raw)
      inner = new InProcessSource({ sharding, shards: 'all' })
      source = new CountingSource(inner)
      ids = shardedIds(db.drizzle, { source, schema: tables })
    })

    afterAll(async () => {
      ids?.close()
      await db?.close()
      await inner?.close()
      await raw?.close()
    })

    it('gives rows of a fixed-shard table IDs on that shard without assign(), and reports them', async () => {
      const reported = await db.insertReturningIds(tables.events, [
        { body: 'one' },
        { body: 'two' },
        { body: 'three' },
      ])
      const stored = await raw.query(
        "SELECT id, body FROM events WHERE body IN ('one', 'two', 'three')",
      )
      expect(stored).toHaveLength(3)
      expect(new Set(reported.map(String))).toEqual(new Set(stored.map((row) => String(row.id))))
      for (const row of stored) expect(sharding.shardOfId(String(row.id))).toBe(EVENTS_SHARD)
    })

    it("gives rows of a scoped table IDs on the scope's shard, and refuses an insert outside any scope", async () => {
      await tenantShard.run(9, () =>
        db.insert(tables.notes, [{ body: 'in 9' }, { body: 'in 9 too' }]),
      )
      await tenantShard.run(41, () => db.insert(tables.notes, [{ body: 'in 41' }]))
      for (const row of await raw.query('SELECT id, body FROM notes')) {
        expect(sharding.shardOfId(String(row.id))).toBe(String(row.body).includes('41') ? 41 : 9)
      }
      const before = await count('SELECT COUNT(*) FROM notes')
      source.reset()
      const outside = await db.insert(tables.notes, [{ body: 'nowhere' }]).catch((e: unknown) => e)
      expect(findError(outside, MissingShardKeyError)).toBeInstanceOf(MissingShardKeyError)
      expect(await count('SELECT COUNT(*) FROM notes')).toBe(before)
      expect(source.idsIssued).toBe(0)
    })

    it('asks for the ID when the query is awaited: awaited inside the scope it is placed, returned from the scope unawaited it is refused', async () => {
      await tenantShard.run(
        17,
        async () => await db.query(tables.notes, [{ body: 'awaited in 17' }]),
      )
      const [row] = await raw.query("SELECT id FROM notes WHERE body = 'awaited in 17'")
      expect(sharding.shardOfId(String(row?.id))).toBe(17)
      const late = await Promise.resolve()
        .then(() => tenantShard.run(17, () => db.query(tables.notes, [{ body: 'returned' }])))
        .catch((e: unknown) => e)
      expect(findError(late, MissingShardKeyError)).toBeInstanceOf(MissingShardKeyError)
      expect((late as Error).message).toContain('await it there')
      expect(await count("SELECT COUNT(*) FROM notes WHERE body = 'returned'")).toBe(0)
    })

    it('refuses a row of a per-row rule that skipped assign() with MissingShardKeyError, writing nothing and spending no ID', async () => {
      const author: Row = await ids.assign(tables.authors, { email: 'default@example.com' })
      await db.insert(tables.authors, [author])
      source.reset()
      const refused = await db
        .insert(tables.posts, [{ authorId: author.id, title: 'no assign' }])
        .catch((e: unknown) => e)
      const error = findError(refused, MissingShardKeyError)
      expect(error).toBeInstanceOf(MissingShardKeyError)
      expect((error as Error).message).toContain('ids.assign(posts, rows)')
      expect(await count("SELECT COUNT(*) FROM posts WHERE title = 'no assign'")).toBe(0)
      expect(source.idsIssued).toBe(0)
      // The same row through the explicit step lands on its author's shard.
      const row: Row = await ids.assign(tables.posts, { authorId: author.id, title: 'assigned' })
      await db.insert(tables.posts, [row])
      expect(sharding.shardOfId(row.id as bigint)).toBe(sharding.shardOfId(author.id as bigint))
    })

    it(`never repeats an ID across 16 concurrent loops of inserts served by $defaultFn`, async () => {
      await Promise.all(
        Array.from({ length: 16 }, async (_, loop) => {
          for (let i = 0; i < 20; i++) {
            const rows = Array.from({ length: i % 4 === 3 ? 3 : 1 }, () => ({
              body: `loop ${loop}`,
            }))
            if (loop % 2 === 0) await db.insert(tables.events, rows)
            else await tenantShard.run(loop, () => db.insert(tables.notes, rows))
          }
        }),
      )
      const expected = 8 * (15 + 5 * 3)
      for (const table of ['events', 'notes']) {
        const [stats] = await raw.query(
          `SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS d FROM ${table} WHERE body LIKE 'loop %'`,
        )
        expect(Number(stats?.n)).toBe(expected)
        expect(Number(stats?.d)).toBe(expected)
      }
    })

    it('refuses $defaultFn from an asynchronous source with ConfigurationError naming assign(); assign() serves it', async () => {
      const other = scopedTables(dialect)
      // The same generator behind promises (a second one for these shards would be refused).
      const asyncIds = shardedIds(db.drizzle, { source: asAsync(inner), schema: other })
      try {
        const refused = await db.insert(other.events, [{ body: 'async' }]).catch((e: unknown) => e)
        expect(findError(refused, ConfigurationError)).toBeInstanceOf(ConfigurationError)
        expect((refused as Error).message).toMatch(/asynchronously.*ids\.assign\(events, rows\)/)
        expect(await count("SELECT COUNT(*) FROM events WHERE body = 'async'")).toBe(0)
        await db.insert(other.events, [await asyncIds.assign(other.events, { body: 'async' })])
        const [row] = await raw.query("SELECT id FROM events WHERE body = 'async'")
        expect(sharding.shardOfId(String(row?.id))).toBe(EVENTS_SHARD)
      } finally {
        asyncIds.close()
      }
    })

    it('serves $defaultFn from a LeasedSource too (synchronous)', async () => {
      const leasedSharding = testLeasedSharding()
      const leased = await LeasedSource.start({
        sharding: leasedSharding,
        registry: new MemoryLeaseRegistry(),
      })
      const other = scopedTables(dialect)
      const leasedIds = shardedIds(db.drizzle, { source: leased, schema: other })
      try {
        const reported = await db.insertReturningIds(other.events, [
          { body: 'leased 1' },
          { body: 'leased 2' },
        ])
        const stored = await raw.query("SELECT id FROM events WHERE body LIKE 'leased %'")
        expect(new Set(stored.map((row) => String(row.id)))).toEqual(new Set(reported.map(String)))
        for (const row of stored)
          expect(leasedSharding.shardOfId(String(row.id))).toBe(EVENTS_SHARD)
      } finally {
        leasedIds.close()
        await leased.close()
      }
    })

    it('refuses a column whose schema was never given to shardedIds() with ConfigurationError', async () => {
      const unbound = scopedTables(dialect)
      const refused = await db
        .insert(unbound.events, [{ body: 'unbound' }])
        .catch((e: unknown) => e)
      expect(findError(refused, ConfigurationError)).toBeInstanceOf(ConfigurationError)
      expect((refused as Error).message).toContain('shardedIds(db, { source, schema })')
    })
  })
}
