/**
 * MikroORM's schema tooling and shardflake's PostgreSQL objects: the schema diff and the migrator
 * leave them alone once shardedIds() is registered, and shardMigration() installs them.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { MikroORM } from '@mikro-orm/core'
import { Migrator } from '@mikro-orm/migrations'
import {
  blogSchemaSql,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import { InProcessSource } from '@shardflake/core'
import { installPostgres, PostgresSource, postgresSql } from '@shardflake/postgres'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { shardedIds } from '../src'
import { shardMigration } from '../src/migrations'
import { openOrm } from './support/blog'
import { Author, Comment, Keyed, Post } from './support/entities-legacy'

const sharding = testSharding(4)
const entities = [Author, Post, Comment, Keyed]

describe('orm.schema and the migrator after installPostgres', () => {
  let raw: RawDatabase
  let folder: string
  const source = new InProcessSource({ sharding, shards: 'all' })

  beforeAll(async () => {
    raw = await freshDatabase('postgres', 'sf_mikro_schema')
    for (const sql of blogSchemaSql('postgres')) await raw.query(sql)
    const pool = new pg.Pool({ connectionString: raw.url, max: 2 })
    pool.on('error', () => undefined) // an idle connection ended by the server
    try {
      await installPostgres(pool, { sharding, shards: 'all' })
    } finally {
      await pool.end()
    }
    folder = await mkdtemp(join(tmpdir(), 'sf-mikro-migrations-'))
  })
  afterAll(async () => {
    await raw?.close()
    source.close()
    if (folder) await rm(folder, { recursive: true, force: true })
  })

  const open = (withShardedIds: boolean): Promise<MikroORM> =>
    openOrm(
      'postgres',
      raw.url,
      entities,
      [...(withShardedIds ? [shardedIds({ source })] : []), Migrator],
      { migrations: { path: folder, snapshot: false, silent: true } },
    )
  const touchesShardflake = /shardflake|"shard_\d+"/

  it('without shardedIds(), the diff would drop shardflake (what the extension prevents)', async () => {
    const orm = await open(false)
    try {
      expect(await orm.schema.getUpdateSchemaSQL({ wrap: false })).toMatch(touchesShardflake)
    } finally {
      await orm.close(true)
    }
  })

  it('with shardedIds(), orm.schema.update() and migrator.create() leave shardflake alone', async () => {
    const orm = await open(true)
    try {
      const ignored = orm.config.get('schemaGenerator').ignoreSchema
      expect(ignored).toEqual(expect.arrayContaining(['shardflake', 'shard_0', 'shard_3']))
      expect(await orm.schema.getUpdateSchemaSQL({ wrap: false })).not.toMatch(touchesShardflake)
      const created = await orm.migrator.create()
      expect([...created.diff.up, ...created.diff.down].join('\n')).not.toMatch(touchesShardflake)
      await orm.schema.update()
      const pool = new pg.Pool({ connectionString: raw.url, max: 2 })
      pool.on('error', () => undefined) // an idle connection ended by the server
      const still = new PostgresSource({ sharding, databases: pool })
      try {
        expect(sharding.shardOfId(await still.nextId(2))).toBe(2)
      } finally {
        await still.close()
        await pool.end()
      }
    } finally {
      await orm.close(true)
    }
  })
})

it("runs @shardflake/postgres's generated DDL up and down through MikroORM's migrator", async () => {
  const raw = await freshDatabase('postgres', 'sf_mikro_migrations')
  const shards = [0, 1, 2]
  class Migration20260101000000Shards extends shardMigration(() => ({
    up: postgresSql({ sharding, shards }),
    down: [
      ...shards.map((shard) => `DROP SCHEMA shard_${shard} CASCADE`),
      'DROP SCHEMA shardflake CASCADE',
    ],
  })) {}
  const schemas = async () =>
    (
      await raw.query(
        "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'shard%' ORDER BY 1",
      )
    ).map((row) => String(row.schema_name))
  const orm = await openOrm('postgres', raw.url, [], [Migrator], {
    discovery: { warnWhenNoEntities: false },
    migrations: {
      silent: true,
      snapshot: false,
      migrationsList: [
        { name: 'Migration20260101000000Shards', class: Migration20260101000000Shards },
      ],
    },
  })
  try {
    expect(await orm.migrator.up()).toHaveLength(1)
    expect(await schemas()).toEqual(['shard_0', 'shard_1', 'shard_2', 'shardflake'])
    const pool = new pg.Pool({ connectionString: raw.url, max: 2 })
    pool.on('error', () => undefined) // an idle connection ended by the server
    try {
      const source = new PostgresSource({ sharding, databases: pool })
      const ids = await source.nextIds(2, 3)
      expect(new Set(ids).size).toBe(3)
      for (const id of ids) expect(sharding.shardOfId(id)).toBe(2)
      await source.close()
    } finally {
      await pool.end()
    }
    expect(await orm.migrator.down()).toHaveLength(1)
    expect(await schemas()).toEqual([])
  } finally {
    await orm.close(true)
    await raw.close()
  }
})
