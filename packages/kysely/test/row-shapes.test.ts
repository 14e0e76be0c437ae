/**
 * Every shape an INSERT's rows take in Kysely, on both servers, with a synchronous source (keys
 * filled as Kysely compiles) and the same source behind promises (pending keys the dialect fills):
 * plain rows (`PrimitiveValueListNode`), rows with left-out or `undefined` columns and SQL values
 * (`ValueListNode` with `DefaultInsertValueNode`), the key column absent, present with a default,
 * `null` or a value. Checked through raw SQL.
 */
import { asAsync, expectedShard } from '@shardflake/conformance'
import { InProcessSource } from '@shardflake/core'
import { sql } from 'kysely'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { type Fixture, openFixture } from './support/fixture'

const dialects = ['postgres', 'mysql'] as const
const kinds = ['synchronous', 'asynchronous'] as const

for (const dialect of dialects) {
  for (const kind of kinds) {
    describe(`${dialect} / ${kind} source`, () => {
      let f: Fixture
      let author: string
      let otherAuthor: string

      beforeAll(async () => {
        f = await openFixture(
          dialect,
          `sf_kysely_shapes_${dialect.slice(0, 2)}_${kind.slice(0, 5)}`,
          (sharding) => {
            const source = new InProcessSource({ sharding, shards: 'all' })
            return kind === 'synchronous' ? source : asAsync(source)
          },
        )
        const made = await f.ids.assign('authors', [
          { email: 'ada@example.com' },
          { email: 'grace@example.com' },
        ])
        await f.db.insertInto('authors').values(made).execute()
        ;[author, otherAuthor] = made.map((row) => String(row.id)) as [string, string]
        expect(f.shardOf(author)).not.toBe(f.shardOf(otherAuthor))
      })
      afterAll(() => f?.close())
      beforeEach(() => f.counting.reset())

      /** Every post with `title`, raw: its ID on its author's shard. */
      async function postsTitled(...titles: string[]) {
        const rows = await f.rows(
          `SELECT id, author_id, title FROM posts WHERE title IN (${titles.map((_, i) => f.p(i + 1)).join(', ')}) ORDER BY title`,
          titles,
        )
        for (const row of rows) expect(f.shardOf(row.id)).toBe(f.shardOf(row.author_id))
        return rows
      }

      it('adds the key column to plain rows (one shard, one nextIds call)', async () => {
        const query = f.db.insertInto('posts').values([
          { author_id: author, title: 'plain 1' },
          { author_id: author, title: 'plain 2' },
        ])
        await query.execute()
        const rows = await postsTitled('plain 1', 'plain 2')
        expect(rows).toHaveLength(2)
        expect(new Set(rows.map((row) => String(row.id))).size).toBe(2)
        expect(f.counting.nextIdsCalls).toBe(1)
        expect(f.counting.idsIssued).toBe(2)
      })

      it('fills rows with left-out and undefined columns and SQL values, one nextIds call per shard', async () => {
        await f.db
          .insertInto('posts')
          .values([
            { author_id: author, title: 'mixed 1' },
            { author_id: otherAuthor, title: sql<string>`concat('mixed', ' 2')` },
            { author_id: author, title: 'mixed 3', id: undefined },
          ])
          .execute()
        const rows = await postsTitled('mixed 1', 'mixed 2', 'mixed 3')
        expect(rows.map((row) => row.author_id)).toEqual([author, otherAuthor, author])
        // Two shards: nextIds for the author's two rows, nextId for the other author's one.
        expect(f.counting.nextIdsCalls).toBe(1)
        expect(f.counting.nextIdCalls).toBe(1)
        expect(f.counting.idsIssued).toBe(3)
      })

      it('fills the key where rows leave it out or set it to null, and keeps the one a row gives', async () => {
        const given = f.sharding.layout.compose({
          timestamp: Date.now() - 86_400_000,
          shard: f.shardOf(author),
          sequence: 3,
        })
        await f.db
          .insertInto('posts')
          .values([
            { author_id: author, title: 'key 1' },
            { author_id: author, title: 'key 2', id: given },
            { author_id: otherAuthor, title: 'key 3', id: undefined },
          ])
          .execute()
        await f.db
          .insertInto('posts')
          .values({ author_id: otherAuthor, title: 'key 4', id: null })
          .execute()
        const rows = await postsTitled('key 1', 'key 2', 'key 3', 'key 4')
        expect(rows).toHaveLength(4)
        expect(String(rows[1]?.id)).toBe(given.toString())
        expect(new Set(rows.map((row) => String(row.id))).size).toBe(4)
        expect(f.counting.idsIssued).toBe(3)
      })

      it('fills a key column that is not called id, by a plain integer key', async () => {
        await f.db
          .insertInto('events')
          .values([
            { tenant_id: 31341, note: 'first' },
            { tenant_id: '31341', note: 'second' },
            { tenant_id: 7, note: null },
          ])
          .execute()
        const rows = await f.rows('SELECT event_id, tenant_id FROM events ORDER BY tenant_id')
        expect(rows).toHaveLength(3)
        for (const row of rows) {
          expect(f.shardOf(row.event_id)).toBe(expectedShard(String(row.tenant_id), 64))
        }
      })

      it('gives one row one ID: a nextId call, not nextIds', async () => {
        await f.db.insertInto('keyed').values({ shard_key: 'single' }).execute()
        expect(f.counting.nextIdCalls).toBe(1)
        expect(f.counting.nextIdsCalls).toBe(0)
        const [row] = await f.rows(`SELECT id FROM keyed WHERE shard_key = ${f.p(1)}`, ['single'])
        expect(f.shardOf(row?.id)).toBe(expectedShard('single', 64))
      })
    })
  }
}
