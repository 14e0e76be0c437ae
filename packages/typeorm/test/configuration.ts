/**
 * Registers the tests (`tag` keeps the databases of each TypeORM major apart). What users
 * configure besides the decorator: EntitySchema entities with `idType: 'bigint'`, shard DDL as
 * a TypeORM migration.
 */
import { freshDatabase, type RawDatabase, testSharding } from '@shardflake/conformance'
import {
  InProcessSource,
  InvalidArgumentError,
  MissingShardKeyError,
  toDdl,
} from '@shardflake/core'
import { DataSource, EntitySchema } from 'typeorm'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { shardedIdColumn, shardedIds, shardMigration } from '../src'

const sharding = testSharding()

export function describeConfiguration(tag: string): void {
  interface Tag {
    id?: bigint
    ownerId: string
    name: string
  }

  const TagSchema = new EntitySchema<Tag>({
    name: 'Tag',
    tableName: 'tags',
    columns: {
      id: shardedIdColumn<Tag>({ shardBy: 'ownerId' }),
      ownerId: { type: 'bigint', name: 'owner_id' },
      name: { type: 'varchar' },
    },
  })

  describe('EntitySchema, idType bigint and migrations on PostgreSQL', () => {
    let raw: RawDatabase
    let dataSource: DataSource
    let source: InProcessSource

    beforeAll(async () => {
      source = new InProcessSource({ sharding, shards: 'all' })
      raw = await freshDatabase('postgres', `sf_typeorm_${tag}config_pg`)
      const tables = shardMigration('Tags1732250000000', {
        up: 'CREATE TABLE tags (id BIGINT NOT NULL PRIMARY KEY, owner_id BIGINT NOT NULL, name TEXT NOT NULL)',
        down: 'DROP TABLE tags',
      })
      // A Ddl as the SQL generators return it: its statements run one by one.
      const shards = shardMigration('ShardflakeShards1732250000001', {
        up: toDdl([
          'CREATE SCHEMA shard_0',
          'CREATE SCHEMA shard_1',
          'CREATE SEQUENCE shard_1.ids',
        ]),
        down: ['DROP SCHEMA shard_0 CASCADE', 'DROP SCHEMA shard_1 CASCADE'],
      })
      dataSource = new DataSource({
        type: 'postgres',
        url: raw.url,
        entities: [TagSchema],
        migrations: [tables, shards],
      })
      shardedIds(dataSource, { source, idType: 'bigint' })
      await dataSource.initialize()
      await dataSource.runMigrations()
    })

    afterAll(async () => {
      await dataSource?.destroy()
      await raw?.close()
      source?.close()
    })

    it('assigns bigint IDs to EntitySchema entities and reads them back as bigint', async () => {
      const tags = dataSource.getRepository(TagSchema)
      const saved = await tags.save({ ownerId: '31341', name: 'typeorm' })
      expect(typeof saved.id).toBe('bigint')
      expect(sharding.shardOfId(saved.id!)).toBe(31341 % 64)
      const loaded = await tags.findOneByOrFail({ name: 'typeorm' })
      expect(loaded.id).toBe(saved.id)
      await expect(tags.insert({ name: 'orphan' } as Tag)).rejects.toThrow(MissingShardKeyError)
      const [count] = await raw.query("SELECT COUNT(*) AS n FROM tags WHERE name = 'orphan'")
      expect(Number(count?.n)).toBe(0)
    })

    it('runs shard DDL (a Ddl) as a migration, up and down', async () => {
      await raw.query("SELECT nextval('shard_1.ids')")
      const schemas = () =>
        raw.query("SELECT nspname FROM pg_namespace WHERE nspname IN ('shard_0', 'shard_1')")
      expect(await schemas()).toHaveLength(2)
      await dataSource.undoLastMigration()
      expect(await schemas()).toHaveLength(0)
      await dataSource.runMigrations()
      expect(await schemas()).toHaveLength(2)
    })

    it('wants a migration name ending with a timestamp', () => {
      expect(() => shardMigration('Shards', { up: [], down: [] })).toThrow(InvalidArgumentError)
    })
  })
}
