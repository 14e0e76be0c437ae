/**
 * INSERTs inside other queries and next to other plugins: WITH ... INSERT (PostgreSQL), MERGE ...
 * INSERT (PostgreSQL 15+), upserts (the stored row keeps its ID), schema-qualified tables and
 * plugins that rename columns. Checked through raw SQL.
 */
import { asAsync, expectedShard, findError } from '@shardflake/conformance'
import { InProcessSource, MissingShardKeyError } from '@shardflake/core'
import { CamelCasePlugin, sql, WithSchemaPlugin } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type ShardedId, shardedIds } from '../src'
import { type Fixture, openFixture, rejection } from './support/fixture'

for (const dialect of ['postgres', 'mysql'] as const) {
  for (const kind of ['synchronous', 'asynchronous'] as const) {
    describe(`${dialect} / ${kind} source`, () => {
      let f: Fixture
      const keyed = async (key: string) =>
        f.rows(`SELECT id, shard_key FROM keyed WHERE shard_key = ${f.p(1)}`, [key])

      beforeAll(async () => {
        f = await openFixture(
          dialect,
          `sf_kysely_queries_${dialect.slice(0, 2)}_${kind.slice(0, 5)}`,
          (sharding) => {
            const source = new InProcessSource({ sharding, shards: 'all' })
            return kind === 'synchronous' ? source : asAsync(source)
          },
        )
      })
      afterAll(() => f?.close())

      it('keeps the stored ID on an upsert that finds its row, and places a new row by its key', async () => {
        const upsert = () =>
          dialect === 'postgres'
            ? f.db
                .insertInto('authors')
                .values({ email: 'same@example.com' })
                .onConflict((oc) => oc.column('email').doUpdateSet({ email: 'same@example.com' }))
                .execute()
            : f.db
                .insertInto('authors')
                .values({ email: 'same@example.com' })
                .onDuplicateKeyUpdate({ email: 'same@example.com' })
                .execute()
        await upsert()
        const [first] = await f.rows(`SELECT id FROM authors WHERE email = 'same@example.com'`)
        await upsert()
        const rows = await f.rows(`SELECT id FROM authors WHERE email = 'same@example.com'`)
        expect(rows.map((row) => String(row.id))).toEqual([String(first?.id)])
        expect(f.shardOf(first?.id)).toBe(expectedShard('same@example.com', 64))
      })

      it('finds the rule of a schema-qualified table by its name', async () => {
        const schema = dialect === 'postgres' ? 'public' : f.raw.name
        const db = f.open({ plugins: [new WithSchemaPlugin(schema), f.ids], dialectOf: f.ids })
        await db.insertInto('keyed').values({ shard_key: 'qualified' }).execute()
        const [row] = await keyed('qualified')
        expect(f.shardOf(row?.id)).toBe(expectedShard('qualified', 64))
      })

      it('reads rules in the names queries use when listed before CamelCasePlugin', async () => {
        type CamelDatabase = { keyed: { id: ShardedId; shardKey: string } }
        const camel = shardedIds<CamelDatabase>({
          source: f.counting,
          tables: { keyed: { shardBy: 'shardKey' } },
        })
        const db = f
          .open({ plugins: [camel, new CamelCasePlugin()], dialectOf: camel })
          .withTables<CamelDatabase>()
        await db.insertInto('keyed').values({ shardKey: 'camel' }).execute()
        const [row] = await keyed('camel')
        expect(f.shardOf(row?.id)).toBe(expectedShard('camel', 64))
      })

      if (dialect === 'postgres') {
        it('fills an INSERT inside WITH, and refuses one whose parent is the other statement', async () => {
          const rows = await f.db
            .with('made', (qc) =>
              qc.insertInto('keyed').values({ shard_key: 'in a cte' }).returning('id'),
            )
            .selectFrom('made')
            .select('id')
            .execute()
          const [row] = await keyed('in a cte')
          expect(String(rows[0]?.id)).toBe(String(row?.id))
          expect(f.shardOf(row?.id)).toBe(expectedShard('in a cte', 64))
          const error = await rejection(
            f.db
              .with('made', (qc) =>
                qc.insertInto('keyed').values({ shard_key: 'parent' }).returning('id'),
              )
              .insertInto('comments')
              .values((eb) => ({
                post_id: eb.selectFrom('made').select('id'),
                body: 'child of a cte',
              }))
              .execute(),
          )
          expect(findError(error, MissingShardKeyError)).toBeInstanceOf(MissingShardKeyError)
          expect(await keyed('parent')).toHaveLength(0)
        })

        it('fills the row of MERGE ... WHEN NOT MATCHED THEN INSERT', async () => {
          await f.db
            .mergeInto('keyed')
            .using(sql<{ k: string }>`(select 'merged' as k)`.as('src'), (join) =>
              join.onRef('keyed.shard_key', '=', 'src.k'),
            )
            .whenNotMatched()
            .thenInsertValues({ shard_key: 'merged' })
            .execute()
          const [row] = await keyed('merged')
          expect(f.shardOf(row?.id)).toBe(expectedShard('merged', 64))
        })
      }
    })
  }
}
