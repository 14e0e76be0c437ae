import { Migrator } from '@mikro-orm/migrations'
import { MikroORM } from '@mikro-orm/postgresql'
import { freshDatabase, type RawDatabase } from '@shardflake/conformance'
import { instagram } from '@shardflake/core'
import { PostgresSource, postgresSql } from '@shardflake/postgres'
import pg from 'pg'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { shardMigration } from '../src/migrations'

const shards = [0, 1, 2]
let raw: RawDatabase

beforeAll(async () => {
  raw = await freshDatabase('postgres', 'sf_mikro_migrations')
})
afterAll(async () => {
  await raw?.close()
})

const schemasLike = async (pattern: string) =>
  (
    await raw.query(
      'SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE $1 ORDER BY 1',
      [pattern],
    )
  ).map((row) => String(row.schema_name))

it("runs @shardflake/postgres's generated DDL up and down through MikroORM's migrator", async () => {
  class Migration20260101000000Shards extends shardMigration(() => ({
    up: postgresSql({ layout: instagram, shards }),
    down: [
      ...shards.map((shard) => `DROP SCHEMA shard_${shard} CASCADE`),
      'DROP SCHEMA shardflake CASCADE',
    ],
  })) {}
  const orm = await MikroORM.init({
    clientUrl: raw.url,
    entities: [],
    discovery: { warnWhenNoEntities: false },
    extensions: [Migrator],
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
    expect(await schemasLike('shard\\_%')).toEqual(['shard_0', 'shard_1', 'shard_2'])
    const pool = new pg.Pool({ connectionString: raw.url, max: 2 })
    try {
      const source = new PostgresSource({ layout: instagram, databases: pool })
      const ids = await source.nextIds(2, 3)
      expect(new Set(ids).size).toBe(3)
      for (const id of ids) expect(instagram.shardOf(id)).toBe(2)
    } finally {
      await pool.end()
    }
    expect(await orm.migrator.down()).toHaveLength(1)
    expect(await schemasLike('shard%')).toEqual([])
  } finally {
    await orm.close(true)
  }
})
