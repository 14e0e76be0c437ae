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

const range = (count: number) => Array.from({ length: count }, (_, shard) => shard)

/** `next_id()` installed in the test database for shards 0..count-1; closing ends its pool. */
export async function postgresSource(raw: RawDatabase, count: number): Promise<IdSource> {
  const pool = new pg.Pool({ connectionString: raw.url, max: 8 })
  await installPostgres(pool, { layout: instagram, shards: `0-${count - 1}` })
  const source = new PostgresSource({ layout: instagram, databases: pool })
  return withClose(source, () => pool.end())
}

/** MariaDB routines in databases `${prefix}0..count-1`; closing ends its pool. */
export async function mysqlSource(
  raw: RawDatabase,
  prefix: string,
  count: number,
): Promise<IdSource> {
  const pool = await createMysqlPool({ uri: raw.url, connectionLimit: 8 })
  await installMysqlShards(pool, { layout: instagram, shards: range(count), schemaPrefix: prefix })
  const source = new MysqlSource({
    layout: instagram,
    pool,
    shards: range(count),
    schemaPrefix: prefix,
  })
  return withClose(source, async () => {
    for (const shard of range(count))
      await pool.query(`DROP DATABASE IF EXISTS \`${prefix}${shard}\``)
    await pool.end()
  })
}

/**
 * `RedisSource` on the shared Redis (`REDIS_URL`) under a key prefix of its own; closing deletes
 * the prefix's keys.
 */
export function redisSource(keyPrefix: string): IdSource {
  const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
  const source = new RedisSource({ layout: instagram, servers: url, keyPrefix })
  return withClose(source, async () => {
    const client = new Redis(url)
    try {
      const keys = await client.keys(`${keyPrefix}*`)
      if (keys.length > 0) await client.del(...keys)
    } finally {
      client.disconnect()
    }
  })
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
  return withClose(source, async () => {
    for (const db of databases) await pool.query(`DROP DATABASE IF EXISTS \`${db}\``)
    await pool.end()
  })
}

function withClose(source: IdSource, end: () => Promise<void>): IdSource {
  return {
    layout: source.layout,
    synchronous: false,
    logicalShards: source.logicalShards,
    nextId: (shard, context) => source.nextId(shard, context),
    nextIds: (shard, count, context) => source.nextIds(shard, count, context),
    async close() {
      await source.close?.()
      await end()
    },
  }
}
