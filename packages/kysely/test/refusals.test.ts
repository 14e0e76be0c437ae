/**
 * What the plugin cannot honour is refused, typed, before any ID is allocated or any row written;
 * what it can is done: `defaultValues()` on a fixed shard, INSERT ... SELECT that brings its keys,
 * IDs given as SQL. Both servers, synchronous and asynchronous sources; checked through raw SQL.
 */
import { asAsync, findError } from '@shardflake/conformance'
import {
  InProcessSource,
  InvalidArgumentError,
  InvalidIdError,
  MisplacedIdError,
  MissingShardKeyError,
  UnsafeNumberError,
} from '@shardflake/core'
import { sql } from 'kysely'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { trustSuppliedIds } from '../src'
import { FIXED_SHARD, type Fixture, openFixture, rejection } from './support/fixture'

for (const dialect of ['postgres', 'mysql'] as const) {
  for (const kind of ['synchronous', 'asynchronous'] as const) {
    describe(`${dialect} / ${kind} source`, () => {
      let f: Fixture
      let author: string
      const count = async (table: string) =>
        Number(Object.values((await f.rows(`SELECT COUNT(*) AS n FROM ${table}`))[0] ?? {})[0])

      beforeAll(async () => {
        f = await openFixture(
          dialect,
          `sf_kysely_refuse_${dialect.slice(0, 2)}_${kind.slice(0, 5)}`,
          (sharding) => {
            const source = new InProcessSource({ sharding, shards: 'all' })
            return kind === 'synchronous' ? source : asAsync(source)
          },
        )
        const [made] = await f.ids.assign('authors', [{ email: 'ada@example.com' }])
        await f.db.insertInto('authors').values(made!).execute()
        author = String(made!.id)
      })
      afterAll(() => f?.close())
      beforeEach(() => f.counting.reset())

      /** Runs `write`, expects `type` (anywhere in the cause chain), and that nothing was drawn or written. */
      async function refused(
        write: () => Promise<unknown>,
        type: new (...args: never[]) => Error,
        table = 'posts',
      ): Promise<Error> {
        const before = await count(table)
        const error = findError(await rejection(write()), type)
        expect(error).toBeInstanceOf(type)
        expect(await count(table)).toBe(before)
        expect(f.counting.idsIssued).toBe(0)
        return error as Error
      }

      it('refuses a batch with one row missing its parent: no ID drawn, no row written', async () => {
        const error = await refused(
          () =>
            f.db
              .insertInto('posts')
              .values([
                { author_id: author, title: 'fine' },
                { title: 'orphan' },
                { author_id: author, title: 'fine too' },
              ])
              .execute(),
          MissingShardKeyError,
        )
        expect(error.message).toContain("'author_id'")
      })

      it('refuses a shard key or parent given as SQL, whose value is unknown before the INSERT', async () => {
        const error = await refused(
          () =>
            f.db
              .insertInto('posts')
              .values({
                author_id: (eb) =>
                  eb.selectFrom('authors').select('id').where('email', '=', 'ada@example.com'),
                title: 'subquery parent',
              })
              .execute(),
          MissingShardKeyError,
        )
        expect(error.message).toMatch(/SQL expression/)
        await refused(
          () =>
            f.db.insertInto('keyed').values({ shard_key: sql<string>`lower('ACME')` }).execute(),
          MissingShardKeyError,
          'keyed',
        )
      })

      it('refuses defaultValues() where the rule needs a key, and places it on a fixed shard', async () => {
        await refused(
          () => f.db.insertInto('keyed').defaultValues().execute(),
          MissingShardKeyError,
          'keyed',
        )
        await f.db.insertInto('counters').defaultValues().execute()
        const rows = await f.rows('SELECT id, label FROM counters')
        expect(rows).toHaveLength(1)
        expect(rows[0]?.label).toBe('none')
        expect(f.shardOf(rows[0]?.id)).toBe(FIXED_SHARD)
      })

      it('refuses INSERT ... SELECT without the key column, and keeps the keys one selects', async () => {
        const error = await refused(
          () =>
            f.db
              .insertInto('posts')
              .columns(['author_id', 'title'])
              .expression((eb) =>
                eb.selectFrom('authors').select(['id', sql<string>`'copied'`.as('title')]),
              )
              .execute(),
          InvalidArgumentError,
        )
        expect(error.message).toMatch(/SELECT/)
        const [id] = await f.ids.assign('posts', [{ author_id: author, title: 'x' }])
        f.counting.reset()
        await f.db
          .insertInto('posts')
          .columns(['id', 'author_id', 'title'])
          .expression((eb) =>
            eb
              .selectFrom('authors')
              .select([
                sql<string>`${id!.id.toString()}`.as('id'),
                'id as author_id',
                sql<string>`'selected'`.as('title'),
              ])
              .where('id', '=', author),
          )
          .execute()
        const [row] = await f.rows(`SELECT id FROM posts WHERE title = 'selected'`)
        expect(String(row?.id)).toBe(id!.id.toString())
        expect(f.counting.idsIssued).toBe(0)
      })

      it("refuses an ID on another shard than the row's rule gives, unless trusted", async () => {
        const wrongShard = (f.shardOf(author) + 1) % 64
        const misplaced = f.sharding.layout.compose({
          timestamp: Date.now() - 60_000,
          shard: wrongShard,
          sequence: 1,
        })
        const error = await refused(
          () =>
            f.db
              .insertInto('posts')
              .values([
                { author_id: author, title: 'right' },
                { author_id: author, title: 'misplaced', id: misplaced },
              ])
              .execute(),
          MisplacedIdError,
        )
        expect(error.message).toContain(`shard ${wrongShard}`)
        expect(error.message).toContain('trustSuppliedIds')
        await trustSuppliedIds(() =>
          f.db
            .insertInto('posts')
            .values({ author_id: author, title: 'imported', id: misplaced })
            .execute(),
        )
        const [row] = await f.rows(`SELECT id FROM posts WHERE title = 'imported'`)
        expect(String(row?.id)).toBe(misplaced.toString())
      })

      it('refuses an ID that is not an exact 64-bit integer', async () => {
        await refused(
          () =>
            f.db
              .insertInto('events')
              .values({ tenant_id: 7, event_id: Number.MAX_SAFE_INTEGER + 2 })
              .execute(),
          UnsafeNumberError,
          'events',
        )
        await refused(
          () => f.db.insertInto('keyed').values({ shard_key: 'k', id: '12abc' }).execute(),
          InvalidIdError,
          'keyed',
        )
      })

      it('keeps an ID given as SQL, unchecked: the caller wrote it', async () => {
        const id = f.sharding.layout.compose({
          timestamp: Date.now() - 1000,
          shard: 9,
          sequence: 2,
        })
        await f.db
          .insertInto('keyed')
          .values({ shard_key: 'sql id', id: sql<string>`${id.toString()}` })
          .execute()
        const [row] = await f.rows(`SELECT id FROM keyed WHERE shard_key = 'sql id'`)
        expect(String(row?.id)).toBe(id.toString())
        expect(f.counting.idsIssued).toBe(0)
      })
    })
  }
}
