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
import { mysqlSql } from '@shardflake/mysql'
import { postgresSql } from '@shardflake/postgres'
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
        up: toDdl([
          'CREATE TABLE tags (id BIGINT NOT NULL PRIMARY KEY, owner_id BIGINT NOT NULL, name TEXT NOT NULL)',
        ]),
        down: 'DROP TABLE tags',
      })
      // The generator's output as it is.
      const shards = shardMigration('ShardflakeShards1732250000001', {
        up: postgresSql({ sharding, shards: '0-1' }),
        down: [
          'DROP SCHEMA shard_0 CASCADE',
          'DROP SCHEMA shard_1 CASCADE',
          'DROP SCHEMA shardflake CASCADE',
        ],
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

    it('runs the shard DDL of @shardflake/postgres as a migration, up and down', async () => {
      const [row] = await raw.query('SELECT shard_1.next_id()::text AS id')
      expect(sharding.shardOfId(String(row?.id))).toBe(1)
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

  describe('migrations on MariaDB', () => {
    let raw: RawDatabase
    let dataSource: DataSource
    const prefix = `sf_typeorm_${tag}mig_${process.pid}_`

    beforeAll(async () => {
      raw = await freshDatabase('mysql', `sf_typeorm_${tag}config_my`)
      dataSource = new DataSource({
        type: 'mariadb',
        url: raw.url,
        migrations: [
          shardMigration('ShardflakeShards1732250000000', {
            up: mysqlSql({ sharding, shards: [3], schemaPrefix: prefix, dialect: 'mariadb' }),
            down: [`DROP DATABASE ${prefix}3`],
          }),
        ],
      })
      await dataSource.initialize()
    })

    afterAll(async () => {
      await dataSource?.destroy()
      await raw?.query(`DROP DATABASE IF EXISTS ${prefix}3`)
      await raw?.close()
    })

    it('runs the routines of @shardflake/mysql (a Ddl) as a migration, up and down', async () => {
      await dataSource.runMigrations()
      const [row] = await raw.query(`SELECT ${prefix}3.next_id() AS id`)
      expect(sharding.shardOfId(String(row?.id))).toBe(3)
      await dataSource.undoLastMigration()
      const left = await raw.query(
        'SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?',
        [`${prefix}3`],
      )
      expect(left).toHaveLength(0)
    })
  })
}
