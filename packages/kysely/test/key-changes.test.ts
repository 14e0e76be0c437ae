/**
 * An ID never changes shard: an upsert by ID, or an UPDATE that names its rows by key, that sets
 * the rule's column of a stored row to a key (or parent) on another shard is refused with
 * ShardKeyChangedError before anything is written; on the same shard, or inside
 * trustSuppliedIds, it goes through. Both servers, both source kinds, checked through raw SQL.
 */
import { asAsync, expectedShard, findError } from '@shardflake/conformance'
import { InProcessSource, ShardKeyChangedError } from '@shardflake/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { trustSuppliedIds } from '../src'
import { type Fixture, openFixture, rejection } from './support/fixture'

for (const dialect of ['postgres', 'mysql'] as const) {
  for (const kind of ['synchronous', 'asynchronous'] as const) {
    describe(`${dialect} / ${kind} source`, () => {
      let f: Fixture
      const shardOfKey = (key: string) => expectedShard(key, 64)
      /** The first of `prefix-0`, `prefix-1`, ... that is (or is not) on `shard`. */
      const keyWhere = (prefix: string, onShard: boolean, shard: number) => {
        for (let i = 0; ; i++) {
          const key = `${prefix}-${i}`
          if ((shardOfKey(key) === shard) === onShard) return key
        }
      }
      const keyOf = async (id: string) =>
        (await f.rows(`SELECT shard_key FROM keyed WHERE id = ${f.p(1)}`, [id]))[0]?.shard_key
      async function keyed(key: string): Promise<string> {
        const [row] = await f.ids.assign('keyed', [{ shard_key: key }])
        await f.db.insertInto('keyed').values(row!).execute()
        return String(row!.id)
      }
      /** Upsert by ID setting the key: to the value, or to the inserted row's own (`excluded`). */
      const upsert = (id: string, key: string, own = false) => {
        const insert = f.db.insertInto('keyed').values({ id, shard_key: key })
        if (dialect === 'postgres') {
          return insert
            .onConflict((oc) =>
              oc
                .column('id')
                .doUpdateSet({ shard_key: own ? (eb) => eb.ref('excluded.shard_key') : key }),
            )
            .execute()
        }
        return insert
          .onDuplicateKeyUpdate({
            shard_key: own ? (eb) => eb.fn<string>('values', ['shard_key']) : key,
          })
          .execute()
      }

      beforeAll(async () => {
        f = await openFixture(
          dialect,
          `sf_kysely_moves_${dialect.slice(0, 2)}_${kind.slice(0, 5)}`,
          (sharding) => {
            const source = new InProcessSource({ sharding, shards: 'all' })
            return kind === 'synchronous' ? source : asAsync(source)
          },
        )
      })
      afterAll(() => f?.close())

      it("refuses an upsert by ID that moves a stored row's key to another shard", async () => {
        for (const own of [false, true]) {
          const id = await keyed(`upsert-me-${own}`)
          const elsewhere = keyWhere(`upsert-elsewhere-${own}`, false, f.shardOf(id))
          const error = findError(await rejection(upsert(id, elsewhere, own)), ShardKeyChangedError)
          expect(error, `own value: ${own}`).toBeInstanceOf(ShardKeyChangedError)
          expect(await keyOf(id)).toBe(`upsert-me-${own}`)
        }
      })

      it('lets an upsert keep the key on its shard, insert a new row under its ID, and move a key when trusted', async () => {
        const id = await keyed('upsert-same')
        const same = keyWhere('upsert-same', true, f.shardOf(id))
        await upsert(id, same)
        expect(await keyOf(id)).toBe(same)
        const fresh = f.sharding.layout.compose({
          timestamp: Date.now() - 86_400_000,
          shard: shardOfKey('upsert-new'),
          sequence: 21,
        })
        await upsert(fresh.toString(), 'upsert-new', true)
        expect(await keyOf(fresh.toString())).toBe('upsert-new')
        const elsewhere = keyWhere('upsert-trusted', false, f.shardOf(id))
        await trustSuppliedIds(() => upsert(id, elsewhere))
        expect(await keyOf(id)).toBe(elsewhere)
      })

      it('refuses an UPDATE that moves the key of a row it names by ID, and lets one on the same shard through', async () => {
        const a = await keyed('update-a')
        const b = await keyed('update-b')
        const elsewhere = keyWhere('update-elsewhere', false, f.shardOf(a))
        const error = findError(
          await rejection(
            f.db
              .updateTable('keyed')
              .set({ shard_key: elsewhere })
              .where((eb) => eb.or([eb('id', '=', b), eb('id', 'in', [a])]))
              .execute(),
          ),
          ShardKeyChangedError,
        )
        expect(error).toBeInstanceOf(ShardKeyChangedError)
        expect(await keyOf(a)).toBe('update-a')
        const same = keyWhere('update-same', true, f.shardOf(a))
        await f.db.updateTable('keyed').set({ shard_key: same }).where('id', '=', a).execute()
        expect(await keyOf(a)).toBe(same)
      })

      it('refuses an UPDATE that moves a post under an author on another shard', async () => {
        const emails = [
          'mover@example.com',
          keyWhere('other', false, shardOfKey('mover@example.com')),
        ]
        const authors = await f.ids.assign(
          'authors',
          emails.map((email) => ({ email })),
        )
        await f.db.insertInto('authors').values(authors).execute()
        const [from, to] = authors.map((author) => String(author.id)) as [string, string]
        const [post] = await f.ids.assign('posts', [{ author_id: from, title: 'moving' }])
        await f.db.insertInto('posts').values(post!).execute()
        const error = findError(
          await rejection(
            f.db
              .updateTable('posts')
              .set({ author_id: to })
              .where('id', '=', String(post!.id))
              .execute(),
          ),
          ShardKeyChangedError,
        )
        expect(error).toBeInstanceOf(ShardKeyChangedError)
        const [row] = await f.rows(`SELECT author_id FROM posts WHERE title = 'moving'`)
        expect(String(row?.author_id)).toBe(from)
      })
    })
  }
}
