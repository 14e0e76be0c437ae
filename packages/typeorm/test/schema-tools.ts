/**
 * TypeORM's own schema tooling leaves shardflake's objects alone: after installing shards, the
 * SQL `migration:generate` would write (the schema builder's log) names none of them, and
 * `synchronize` keeps them working. Registers the tests; `tag` keeps each major's databases apart.
 */
import { freshDatabase, type RawDatabase, testSharding } from '@shardflake/conformance'
import { createMysqlPool, installMysql, MysqlSource } from '@shardflake/mysql'
import { installPostgres, PostgresSource } from '@shardflake/postgres'
import pg from 'pg'
import { DataSource } from 'typeorm'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { shardedIds } from '../src'
import { Author, Comment, dataSourceOptions, Keyed, Post } from './blog'

const entities = [Author, Post, Comment, Keyed]

/** The SQL `migration:generate` would write for `dataSource`, up and down. */
async function generatedSql(dataSource: DataSource): Promise<string[]> {
  const log = await dataSource.driver.createSchemaBuilder().log()
  // Creating the blog's tables drops nothing.
  for (const query of log.upQueries) expect(query.query).not.toMatch(/^\s*DROP/i)
  return [...log.upQueries, ...log.downQueries].map((query) => query.query)
}

/** Any of shardflake's objects: its schema, shard schemas or databases, routines. */
const SHARDFLAKE = /shardflake|shard_\d|tools_s\d|next_id|reserve_ids/i

export function describeSchemaTools(tag: string): void {
  const sharding = testSharding()

  describe('synchronize and migration:generate on PostgreSQL', () => {
    let raw: RawDatabase
    let pool: pg.Pool
    let source: PostgresSource
    let dataSource: DataSource

    beforeAll(async () => {
      raw = await freshDatabase('postgres', `sf_typeorm_${tag}tools_pg`)
      pool = new pg.Pool({ connectionString: raw.url, max: 4 })
      pool.on('error', () => undefined) // an idle connection ended by the server
      await installPostgres(pool, { sharding, shards: '0-63' })
      source = new PostgresSource({ sharding, databases: pool })
      dataSource = new DataSource(dataSourceOptions(raw, entities))
      shardedIds(dataSource, { source })
      await dataSource.initialize()
    })

    afterAll(async () => {
      await dataSource?.destroy()
      await source?.close()
      await pool?.end()
      await raw?.close()
    })

    const shardObjects = async () =>
      (
        await raw.query(
          "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'shard%' ORDER BY nspname",
        )
      ).map((row) => String(row.nspname))

    it('generates SQL for the entities only, and synchronize keeps the shards', async () => {
      const before = await shardObjects()
      expect(before.length).toBeGreaterThan(64)
      const sql = await generatedSql(dataSource)
      expect(sql.length).toBeGreaterThan(0) // the blog tables do not exist yet
      for (const query of sql) expect(query).not.toMatch(SHARDFLAKE)
      await dataSource.synchronize()
      expect(await generatedSql(dataSource)).toEqual([])
      expect(await shardObjects()).toEqual(before)
      const author = await dataSource
        .getRepository(Author)
        .save(Object.assign(new Author(), { email: 'tools@example.com' }))
      expect(sharding.shardOfId(author.id)).toBeGreaterThanOrEqual(0)
    })
  })

  describe('synchronize and migration:generate on MariaDB', () => {
    let raw: RawDatabase
    let source: MysqlSource
    let dataSource: DataSource
    const schemaPrefix = `sf_typeorm_${tag}tools_s`

    beforeAll(async () => {
      raw = await freshDatabase('mysql', `sf_typeorm_${tag}tools_my`)
      const pool = await createMysqlPool({ uri: raw.url, connectionLimit: 4 })
      for (const shard of [0, 1, 2, 3]) {
        await pool.query(`DROP DATABASE IF EXISTS \`${schemaPrefix}${shard}\``)
      }
      await installMysql(pool, { sharding, shards: '0-3', schemaPrefix })
      await pool.end()
      source = new MysqlSource({ sharding, databases: raw.url, shards: '0-3', schemaPrefix })
      dataSource = new DataSource(dataSourceOptions(raw, entities))
      shardedIds(dataSource, { source })
      await dataSource.initialize()
    })

    afterAll(async () => {
      await dataSource?.destroy()
      await source?.close()
      for (const shard of [0, 1, 2, 3]) {
        await raw?.query(`DROP DATABASE IF EXISTS \`${schemaPrefix}${shard}\``)
      }
      await raw?.close()
    })

    it('generates SQL for the entities only, and synchronize keeps the shards', async () => {
      const sql = await generatedSql(dataSource)
      expect(sql.length).toBeGreaterThan(0)
      for (const query of sql) expect(query).not.toMatch(SHARDFLAKE)
      await dataSource.synchronize()
      expect(await generatedSql(dataSource)).toEqual([])
      const ids = await source.nextIds(3, 2)
      expect(ids.map((id) => sharding.shardOfId(id))).toEqual([3, 3])
    })
  })
}
