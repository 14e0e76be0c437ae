/**
 * Registers the tests (`tag` keeps the databases of each TypeORM major apart). What users configure besides the decorator: lossy BIGINT settings are refused, EntitySchema
 * entities and `idType: 'bigint'` work, shard DDL becomes a TypeORM migration.
 */
import { freshDatabase, type RawDatabase } from '@shardflake/conformance'
import {
  ConfigurationError,
  InProcessSource,
  InvalidArgumentError,
  instagram,
  integerShard,
  MissingShardKeyError,
} from '@shardflake/core'
import { mysqlShardStatements } from '@shardflake/mysql'
import { postgresSql } from '@shardflake/postgres'
import pg from 'pg'
import { DataSource, EntitySchema } from 'typeorm'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ShardedId, shardedIdColumn, shardMigration, useShardedIds } from '../src'
import { entities } from './blog'

const source = () => new InProcessSource({ layout: instagram, shards: 'all', logicalShards: 64 })

export function describeConfiguration(tag: string): void {
  describe('lossy BIGINT settings', () => {
    it('refuses parseInt8 on PostgreSQL with a ConfigurationError', () => {
      const dataSource = new DataSource({ type: 'postgres', parseInt8: true, entities })
      expect(() => useShardedIds(dataSource, { source: source() })).toThrow(ConfigurationError)
      expect(() => useShardedIds(dataSource, { source: source() })).toThrow(/parseInt8/)
    })

    it('refuses a pg type parser that turns BIGINT into a number', () => {
      const dataSource = new DataSource({ type: 'postgres', entities })
      const before = pg.types.getTypeParser(20)
      pg.types.setTypeParser(20, Number)
      try {
        expect(() => useShardedIds(dataSource, { source: source() })).toThrow(ConfigurationError)
      } finally {
        pg.types.setTypeParser(20, before)
      }
      expect(() => useShardedIds(dataSource, { source: source() })).not.toThrow()
    })

    it('refuses mysql2 without bigNumberStrings, in the options or in extra', () => {
      for (const options of [
        { bigNumberStrings: false },
        { supportBigNumbers: false },
        { extra: { bigNumberStrings: false } },
      ]) {
        const dataSource = new DataSource({ type: 'mariadb', entities, ...options })
        expect(() => useShardedIds(dataSource, { source: source() })).toThrow(ConfigurationError)
      }
    })

    it('refuses a number idType', () => {
      const dataSource = new DataSource({ type: 'postgres', entities })
      expect(() =>
        useShardedIds(dataSource, { source: source(), idType: 'number' as 'string' }),
      ).toThrow(ConfigurationError)
    })

    it('refuses a rule with no or two shard sources', () => {
      expect(() => ShardedId({} as { shard: number })).toThrow(InvalidArgumentError)
      expect(() => ShardedId({ shard: 1, shardBy: 'x' } as { shard: number })).toThrow(
        InvalidArgumentError,
      )
    })
  })

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

    beforeAll(async () => {
      raw = await freshDatabase('postgres', `sf_typeorm_${tag}config_pg`)
      const tables = shardMigration('Tags1732250000000', {
        up: 'CREATE TABLE tags (id BIGINT NOT NULL PRIMARY KEY, owner_id BIGINT NOT NULL, name TEXT NOT NULL)',
        down: 'DROP TABLE tags',
      })
      // The generator's output as it is: one script with every statement.
      const shards = shardMigration('ShardflakeShards1732250000001', {
        up: postgresSql({ layout: instagram, shards: '0-1' }),
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
      useShardedIds(dataSource, { source: source(), idType: 'bigint' })
      await dataSource.initialize()
      await dataSource.runMigrations()
    })

    afterAll(async () => {
      await dataSource?.destroy()
      await raw?.close()
    })

    it('assigns bigint IDs to EntitySchema entities and reads them back as bigint', async () => {
      const tags = dataSource.getRepository(TagSchema)
      const saved = await tags.save({ ownerId: '31341', name: 'typeorm' })
      expect(typeof saved.id).toBe('bigint')
      expect(instagram.shardOf(saved.id!)).toBe(integerShard(31341n, 64))
      const loaded = await tags.findOneByOrFail({ name: 'typeorm' })
      expect(loaded.id).toBe(saved.id)
      await expect(tags.insert({ name: 'orphan' } as Tag)).rejects.toThrow(MissingShardKeyError)
      const [count] = await raw.query("SELECT COUNT(*) AS n FROM tags WHERE name = 'orphan'")
      expect(Number(count?.n)).toBe(0)
    })

    it('runs the shard DDL of @shardflake/postgres as a migration, up and down', async () => {
      const [row] = await raw.query('SELECT shard_1.next_id()::text AS id')
      expect(instagram.shardOf(String(row?.id))).toBe(1)
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
    const prefix = `sf_typeorm_${tag}mig_`

    beforeAll(async () => {
      raw = await freshDatabase('mysql', `sf_typeorm_${tag}config_my`)
      await raw.query(`DROP DATABASE IF EXISTS ${prefix}3`)
      const options = { layout: instagram, dialect: 'mariadb', schemaPrefix: prefix } as const
      dataSource = new DataSource({
        type: 'mariadb',
        url: raw.url,
        migrations: [
          shardMigration('ShardflakeShards1732250000000', {
            up: mysqlShardStatements(options, 3),
            down: [`DROP DATABASE ${prefix}3`],
          }),
        ],
      })
      await dataSource.initialize()
    })

    afterAll(async () => {
      await dataSource?.destroy()
      await raw?.close()
    })

    it('runs the routines of @shardflake/mysql as a migration, up and down', async () => {
      await dataSource.runMigrations()
      const [row] = await raw.query(`SELECT ${prefix}3.next_id() AS id`)
      expect(instagram.shardOf(String(row?.id))).toBe(3)
      await dataSource.undoLastMigration()
      const left = await raw.query(
        'SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?',
        [`${prefix}3`],
      )
      expect(left).toHaveLength(0)
    })
  })
}
