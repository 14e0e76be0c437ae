/**
 * When Kysely first connects through the plugin's dialect, the rules are checked against the
 * database's foreign keys: `shardBy` on a column holding a sharded table's ID, and `sameShardAs`
 * on a column holding the key of a table that is not declared, are refused before any row is
 * written.
 */
import {
  blogSchemaSql,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import { InProcessSource, InvalidShardRuleError } from '@shardflake/core'
import { Kysely } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type ShardedTables, shardedIds } from '../src'
import { type BlogDatabase, blogDialect } from './support/blog'

const source = new InProcessSource({ sharding: testSharding(), shards: 'all' })
afterAll(() => source.close())

for (const dialect of ['postgres', 'mysql'] as const) {
  describe(`${dialect}: rules against foreign keys`, () => {
    let raw: RawDatabase

    beforeAll(async () => {
      raw = await freshDatabase(dialect, `sf_kysely_fk_${dialect.slice(0, 2)}`)
      for (const sql of blogSchemaSql(dialect)) await raw.query(sql)
    })
    afterAll(() => raw?.close())

    /** Inserts an author through a Kysely whose plugin has `tables`; resolves to the error, if any. */
    async function firstInsert(tables: ShardedTables<BlogDatabase>): Promise<unknown> {
      const ids = shardedIds<BlogDatabase>({ source, tables })
      const db = new Kysely<BlogDatabase>({
        dialect: ids.dialect(blogDialect(dialect, raw.url)),
        plugins: [ids],
      })
      try {
        await db
          .insertInto('authors')
          .values({ email: `${Object.keys(tables).join('-')}@x.y` })
          .execute()
        return undefined
      } catch (error) {
        return error
      } finally {
        await db.destroy()
      }
    }

    it('refuses shardBy on a foreign key to a sharded table, naming sameShardAs', async () => {
      const error = await firstInsert({
        authors: { shardBy: 'email' },
        posts: { shardBy: 'author_id' },
      })
      expect(error).toBeInstanceOf(InvalidShardRuleError)
      expect((error as Error).message).toMatch(/sameShardAs: 'author_id'/)
      expect(await raw.query('SELECT id FROM authors')).toHaveLength(0)
    })

    it('refuses sameShardAs on a foreign key to a table that is not declared', async () => {
      const error = await firstInsert({
        authors: { shardBy: 'email' },
        comments: { sameShardAs: 'post_id' },
      })
      expect(error).toBeInstanceOf(InvalidShardRuleError)
      expect((error as Error).message).toMatch(/posts\.id.*Declare posts in tables/)
      expect(await raw.query('SELECT id FROM authors')).toHaveLength(0)
    })

    it('accepts rules the foreign keys agree with, and shardBy on a key of an undeclared table', async () => {
      expect(
        await firstInsert({
          authors: { shardBy: 'email' },
          posts: { sameShardAs: 'author_id' },
          comments: { sameShardAs: 'post_id' },
        }),
      ).toBeUndefined()
      // posts not declared: its key is a plain key to comments
      expect(
        await firstInsert({ authors: { shardBy: 'email' }, comments: { shardBy: 'post_id' } }),
      ).toBeUndefined()
      expect(await raw.query('SELECT id FROM authors')).toHaveLength(2)
    })
  })
}
