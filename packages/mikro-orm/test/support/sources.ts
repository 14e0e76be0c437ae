import { type Dialect, type RawDatabase, withClose } from '@shardflake/conformance'
import type { IdSource, Sharding } from '@shardflake/core'
import {
  createMysqlPool,
  installMysql,
  installTicketServers,
  MysqlSource,
  TicketServerSource,
} from '@shardflake/mysql'
import { installPostgres, PostgresSource } from '@shardflake/postgres'
import { RedisSource } from '@shardflake/redis'
import { Redis } from 'ioredis'
import pg from 'pg'

type SourceMaker = (raw: RawDatabase, sharding: Sharding, name: string) => Promise<IdSource>

/**
 * The database-backed sources of the matrix for a server: its own routines (`PostgresSource` /
 * `MysqlSource`) and `RedisSource`.
 */
export function databaseSources(dialect: Dialect): Record<string, SourceMaker> {
  return {
    ...(dialect === 'postgres' ? { PostgresSource: postgresSource } : { MysqlSource: mysqlSource }),
    RedisSource: (raw, sharding) => redisSource(sharding, `${raw.name}:`),
  }
}

/** `next_id()` installed in the test database for every logical shard; closing ends its pool. */
export async function postgresSource(raw: RawDatabase, sharding: Sharding): Promise<IdSource> {
  const pool = new pg.Pool({ connectionString: raw.url, max: 8 })
  pool.on('error', () => undefined) // an idle connection ended by the server
  await installPostgres(pool, { sharding, shards: 'all' })
  const source = new PostgresSource({ sharding, databases: pool })
  return withClose(source, () => pool.end())
}

/**
 * MariaDB routines for every logical shard, in databases `<test database>_s<n>` on the suite's
 * server (one per shard: keep the sharding small); closing drops them and ends its pool.
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

/** `RedisSource` on the shared Redis (`REDIS_URL`) under a key prefix of its own; closing deletes its keys. */
export function redisSource(sharding: Sharding, keyPrefix: string): Promise<IdSource> {
  const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
  const source = new RedisSource({ sharding, servers: url, keyPrefix })
  return Promise.resolve(
    withClose(source, async () => {
      const client = new Redis(url)
      try {
        const keys = await client.keys(`${keyPrefix}*`)
        if (keys.length > 0) await client.del(...keys)
      } finally {
        client.disconnect()
      }
    }),
  )
}

/**
 * Flickr-style `TicketServerSource` over two ticket databases `${prefix}a` / `${prefix}b` on the
 * suite's server, offsets 1 and 2 (dropped on close).
 */
export async function ticketSource(raw: RawDatabase, prefix: string): Promise<IdSource> {
  const pool = await createMysqlPool({ uri: raw.url, connectionLimit: 8 })
  const databases = [`${prefix}a`, `${prefix}b`]
  for (const db of databases) await pool.query(`DROP DATABASE IF EXISTS \`${db}\``)
  const servers = databases.map((database) => ({ pool, database }))
  await installTicketServers({ servers, sequence: 'blog' })
  const source = new TicketServerSource({ servers, sequence: 'blog' })
  return withClose(source, async () => {
    for (const db of databases) await pool.query(`DROP DATABASE IF EXISTS \`${db}\``)
    await pool.end()
  })
}
