import { type RawDatabase, withClose } from '@shardflake/conformance'
import type { IdSource, Sharding } from '@shardflake/core'
import { createMysqlPool, installMysql, MysqlSource } from '@shardflake/mysql'
import { installPostgres, PostgresSource } from '@shardflake/postgres'
import pg from 'pg'

/** `next_id()` installed in the test database for every logical shard; closing ends its pool. */
export async function postgresSource(raw: RawDatabase, sharding: Sharding): Promise<IdSource> {
  const pool = new pg.Pool({ connectionString: raw.url, max: 8 })
  await installPostgres(pool, { sharding, shards: 'all' })
  const source = new PostgresSource({ sharding, databases: pool })
  return withClose(source, () => pool.end())
}

/**
 * MariaDB routines for every logical shard, in databases `<test database>_s<n>` (one per shard:
 * keep the sharding small); closing drops them and ends its pool.
 */
export async function mysqlSource(raw: RawDatabase, sharding: Sharding): Promise<IdSource> {
  const pool = await createMysqlPool({ uri: raw.url, connectionLimit: 8 })
  const schemaPrefix = `${raw.name}_s`
  await installMysql(pool, { sharding, shards: 'all', schemaPrefix })
  const source = new MysqlSource({ sharding, databases: pool, schemaPrefix })
  return withClose(source, async () => {
    for (let shard = 0; shard < sharding.logicalShards; shard++) {
      await pool.query(`DROP DATABASE IF EXISTS \`${schemaPrefix}${shard}\``)
    }
    await pool.end()
  })
}
