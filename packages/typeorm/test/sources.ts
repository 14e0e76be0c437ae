/**
 * The database sources under test, built on the suite's fresh database. Each wraps its pool so
 * the suite's `close()` ends it.
 */
import type { RawDatabase } from '@shardflake/conformance'
import { type IdSource, instagram } from '@shardflake/core'
import {
  createMysqlPool,
  installMysqlShards,
  MysqlSource,
  TicketServerSource,
} from '@shardflake/mysql'
import { installPostgres, PostgresSource } from '@shardflake/postgres'
import { RedisSource } from '@shardflake/redis'
import { Redis } from 'ioredis'
import pg from 'pg'

/** `PostgresSource` over `next_id()` of shards 0-63 in the suite's database, on the ORM's connection. */
export async function postgresSource(raw: RawDatabase): Promise<IdSource> {
  const pool = new pg.Pool({ connectionString: raw.url, max: 4 })
  await installPostgres(pool, { layout: instagram, shards: '0-63' })
  const source = new PostgresSource({ layout: instagram, databases: pool, useContextQuery: true })
  source.close = async () => {
    await pool.end()
  }
  return source
}

/** `MysqlSource` over the stored routines of shards 0-7, one database `${prefix}${n}` each. */
export async function mysqlSource(raw: RawDatabase, prefix: string): Promise<IdSource> {
  const pool = await createMysqlPool({ uri: raw.url, connectionLimit: 4 })
  const shards = [0, 1, 2, 3, 4, 5, 6, 7]
  await installMysqlShards(pool, { layout: instagram, shards, schemaPrefix: prefix })
  return new MysqlSource({ layout: instagram, pool, shards, schemaPrefix: prefix, endPools: true })
}

/** `RedisSource` on the shared Redis (`REDIS_URL`) under its own key prefix, deleted on close. */
export function redisSource(keyPrefix: string): IdSource {
  const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
  const source = new RedisSource({ layout: instagram, servers: url, keyPrefix })
  const close = source.close.bind(source)
  source.close = async () => {
    await close()
    const client = new Redis(url)
    try {
      const keys = await client.keys(`${keyPrefix}*`)
      if (keys.length > 0) await client.del(...keys)
    } finally {
      client.disconnect()
    }
  }
  return source
}

/**
 * Flickr-style `TicketServerSource` over two ticket databases `${prefix}a` / `${prefix}b` on the
 * suite's server, offsets 1 and 2 (dropped on close).
 */
export async function ticketSource(raw: RawDatabase, prefix: string): Promise<IdSource> {
  const pool = await createMysqlPool({ uri: raw.url, connectionLimit: 8 })
  const databases = [`${prefix}a`, `${prefix}b`]
  for (const db of databases) await pool.query(`DROP DATABASE IF EXISTS \`${db}\``)
  const source = new TicketServerSource({
    servers: databases.map((database) => ({ pool, database })),
    sequence: 'blog',
  })
  await source.install()
  source.close = async () => {
    for (const db of databases) await pool.query(`DROP DATABASE IF EXISTS \`${db}\``)
    await pool.end()
  }
  return source
}
