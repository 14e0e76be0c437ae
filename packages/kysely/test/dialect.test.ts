/**
 * Which path does what: a synchronous source fills keys when Kysely compiles (so a compiled
 * INSERT carries its IDs), an asynchronous one leaves pending IDs that the plugin's dialect fills
 * each time the query runs; `insertId`; what happens without the dialect; transactions and
 * savepoints through the wrapped driver. Both servers, checked through raw SQL.
 */
import { asAsync, findError } from '@shardflake/conformance'
import { ConfigurationError, InProcessSource } from '@shardflake/core'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { PendingId } from '../src'
import { type Fixture, fixtureIds, openFixture, rejection } from './support/fixture'

for (const dialect of ['postgres', 'mysql'] as const) {
  const tag = dialect.slice(0, 2)

  describe(`${dialect} / synchronous source`, () => {
    let f: Fixture
    beforeAll(async () => {
      f = await openFixture(
        dialect,
        `sf_kysely_dialect_${tag}_sync`,
        (sharding) => new InProcessSource({ sharding, shards: 'all' }),
      )
    })
    afterAll(() => f?.close())

    it('fills keys when Kysely compiles: .compile() shows them, each compile draws new ones', () => {
      const query = f.db.insertInto('keyed').values({ shard_key: 'compiled' })
      const first = query.compile()
      const second = query.compile()
      const [, id1] = first.parameters as [string, bigint]
      const [, id2] = second.parameters as [string, bigint]
      expect(typeof id1).toBe('bigint')
      expect(id2).not.toBe(id1)
      expect(f.shardOf(id1)).toBe(f.shardOf(id2))
    })

    it('runs a compiled INSERT with the IDs it carries: a second run fails on the primary key and writes nothing', async () => {
      const compiled = f.db.insertInto('keyed').values({ shard_key: 'twice' }).compile()
      await f.db.executeQuery(compiled)
      await expect(f.db.executeQuery(compiled)).rejects.toThrow(/duplicate|unique/i)
      const rows = await f.rows(`SELECT id FROM keyed WHERE shard_key = 'twice'`)
      expect(rows.map((row) => String(row.id))).toEqual([String(compiled.parameters[1])])
    })

    it('works as the plugin alone (db.withPlugin), without its dialect, and gives no insertId then', async () => {
      const alone = f.open({ plugins: [], dialectOf: undefined }).withPlugin(f.ids)
      const result = await alone
        .insertInto('keyed')
        .values({ shard_key: 'alone' })
        .executeTakeFirstOrThrow()
      expect(result.insertId).toBeUndefined()
      const [row] = await f.rows(`SELECT id FROM keyed WHERE shard_key = 'alone'`)
      expect(f.shardOf(row?.id)).toBe(f.sharding.shardForKey('alone'))
    })
  })

  describe(`${dialect} / asynchronous source`, () => {
    let f: Fixture
    beforeAll(async () => {
      f = await openFixture(dialect, `sf_kysely_dialect_${tag}_async`, (sharding) =>
        asAsync(new InProcessSource({ sharding, shards: 'all' })),
      )
    })
    afterAll(() => f?.close())
    beforeEach(() => f.counting.reset())

    it('leaves pending IDs in the compiled query, which the dialect fills on every run', async () => {
      const compiled = f.db.insertInto('keyed').values({ shard_key: 'pending' }).compile()
      const pending = compiled.parameters[1]
      expect(pending).toBeInstanceOf(PendingId)
      expect((pending as PendingId).shard).toBe(f.sharding.shardForKey('pending'))
      expect(f.counting.idsIssued).toBe(0)
      await f.db.executeQuery(compiled)
      await f.db.executeQuery(compiled)
      const rows = await f.rows(`SELECT id FROM keyed WHERE shard_key = 'pending'`)
      expect(rows).toHaveLength(2)
      expect(rows[0]?.id).not.toBe(rows[1]?.id)
      for (const row of rows) expect(f.shardOf(row.id)).toBe((pending as PendingId).shard)
      expect(f.counting.idsIssued).toBe(2)
    })

    if (dialect === 'mysql') {
      it('fills pending IDs of a streamed INSERT too', async () => {
        for await (const _ of f.db
          .insertInto('keyed')
          .values([{ shard_key: 'streamed 1' }, { shard_key: 'streamed 2' }])
          .stream()) {
          // drained: the INSERT has run
        }
        const rows = await f.rows(
          `SELECT id, shard_key FROM keyed WHERE shard_key LIKE 'streamed %' ORDER BY shard_key`,
        )
        expect(rows).toHaveLength(2)
        for (const row of rows) {
          expect(f.shardOf(row.id)).toBe(f.sharding.shardForKey(String(row.shard_key)))
        }
      })
    }

    it('refuses an asynchronous source on a Kysely without the dialect, before anything is drawn or written', async () => {
      const { counting } = f
      // A plugin whose dialect() was never called.
      const db = f.open({ plugins: [fixtureIds(counting)], dialectOf: undefined })
      const query = db.insertInto('keyed').values({ shard_key: 'nowhere' })
      expect(() => query.compile()).toThrow(ConfigurationError)
      const error = findError(await rejection(query.execute()), ConfigurationError)
      expect(error).toBeInstanceOf(ConfigurationError)
      expect((error as Error).message).toMatch(/ids\.dialect\(/)
      expect(counting.idsIssued).toBe(0)
      expect(await f.rows(`SELECT id FROM keyed WHERE shard_key = 'nowhere'`)).toHaveLength(0)
    })

    it('refuses a pending ID that reaches a driver the dialect does not wrap: nothing written', async () => {
      const unwrapped = f.open({ plugins: [f.ids], dialectOf: undefined })
      const error = findError(
        await rejection(unwrapped.insertInto('keyed').values({ shard_key: 'leaked' }).execute()),
        ConfigurationError,
      )
      expect(error).toBeInstanceOf(ConfigurationError)
      expect(await f.rows(`SELECT id FROM keyed WHERE shard_key = 'leaked'`)).toHaveLength(0)
    })
  })

  for (const kind of ['synchronous', 'asynchronous'] as const) {
    describe(`${dialect} / ${kind} source: insertId, transactions`, () => {
      let f: Fixture
      beforeAll(async () => {
        f = await openFixture(
          dialect,
          `sf_kysely_insertid_${tag}_${kind.slice(0, 5)}`,
          (sharding) => {
            const source = new InProcessSource({ sharding, shards: 'all' })
            return kind === 'synchronous' ? source : asAsync(source)
          },
        )
      })
      afterAll(() => f?.close())

      it("gives a one-row INSERT its row's ID as insertId, a filled one or a given one", async () => {
        const filled = await f.db
          .insertInto('keyed')
          .values({ shard_key: 'one row' })
          .executeTakeFirstOrThrow()
        const [row] = await f.rows(`SELECT id FROM keyed WHERE shard_key = 'one row'`)
        expect(filled.insertId).toBe(BigInt(String(row?.id)))
        const given = f.sharding.layout.compose({
          timestamp: Date.now() - 5000,
          shard: f.sharding.shardForKey('given'),
          sequence: 1,
        })
        const kept = await f.db
          .insertInto('keyed')
          .values({ shard_key: 'given', id: given.toString() })
          .executeTakeFirstOrThrow()
        expect(kept.insertId).toBe(given)
      })

      it('gives no insertId for several rows, or when a conflict clause may keep another row', async () => {
        const many = await f.db
          .insertInto('keyed')
          .values([{ shard_key: 'many 1' }, { shard_key: 'many 2' }])
          .executeTakeFirstOrThrow()
        expect(many.insertId).toBeUndefined()
        const first = await f.db
          .insertInto('authors')
          .values({ email: 'upsert@example.com' })
          .executeTakeFirstOrThrow()
        const again =
          dialect === 'postgres'
            ? f.db
                .insertInto('authors')
                .values({ email: 'upsert@example.com' })
                .onConflict((oc) => oc.column('email').doUpdateSet({ email: 'upsert@example.com' }))
            : f.db
                .insertInto('authors')
                .values({ email: 'upsert@example.com' })
                .onDuplicateKeyUpdate({ email: 'upsert@example.com' })
        expect((await again.executeTakeFirstOrThrow()).insertId).toBeUndefined()
        const ignored =
          dialect === 'postgres'
            ? f.db
                .insertInto('authors')
                .values({ email: 'upsert@example.com' })
                .onConflict((oc) => oc.doNothing())
            : f.db.insertInto('authors').ignore().values({ email: 'upsert@example.com' })
        expect((await ignored.executeTakeFirstOrThrow()).insertId).toBeUndefined()
        const rows = await f.rows(`SELECT id FROM authors WHERE email = 'upsert@example.com'`)
        expect(rows.map((row) => BigInt(String(row.id)))).toEqual([first.insertId])
      })

      it('writes through transactions and savepoints, and a rollback writes nothing', async () => {
        const trx = await f.db.startTransaction().execute()
        await trx.insertInto('keyed').values({ shard_key: 'kept' }).execute()
        const savepoint = await trx.savepoint('before_dropped').execute()
        await savepoint.insertInto('keyed').values({ shard_key: 'dropped' }).execute()
        await savepoint.rollbackToSavepoint('before_dropped').execute()
        await trx.commit().execute()
        await expect(
          f.db.transaction().execute(async (inner) => {
            await inner.insertInto('keyed').values({ shard_key: 'rolled back' }).execute()
            throw new Error('on purpose')
          }),
        ).rejects.toThrow('on purpose')
        const rows = await f.rows(
          `SELECT shard_key FROM keyed WHERE shard_key IN ('kept', 'dropped', 'rolled back')`,
        )
        expect(rows.map((row) => row.shard_key)).toEqual(['kept'])
      })
    })
  }
}
