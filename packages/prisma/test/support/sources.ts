import type { RawDatabase } from '@shardflake/conformance'
import { instagram } from '@shardflake/core'
import {
  BIG_NUMBER_OPTIONS,
  installMysqlShards,
  MysqlSource,
  TicketServerSource,
} from '@shardflake/mysql'
import { installPostgres, PostgresSource, type PrefetchOptions } from '@shardflake/postgres'
import { RedisSource } from '@shardflake/redis'
import { Redis } from 'ioredis'
import mysql from 'mysql2/promise'
import pg from 'pg'

/** Logical shards of the database-source tests (each is a schema or database to install). */
export const logicalShards = 8
const shards = Array.from({ length: logicalShards }, (_, i) => i)
const pools: { end(): Promise<void> }[] = []

/**
 * A `PostgresSource` on the test database, with `next_id()` installed for every logical shard.
 * It has its own small pool: never Prisma's connections.
 */
export async function postgresSource(raw: RawDatabase, prefetch?: PrefetchOptions) {
  const pool = new pg.Pool({ connectionString: raw.url, max: 2 })
  pools.push(pool)
  await installPostgres(pool, { layout: instagram, shards })
  return new PostgresSource({
    layout: instagram,
    databases: pool,
    logicalShards,
    ...(prefetch && { prefetch }),
  })
}

/**
 * A `MysqlSource` with its routines in databases `<test database>_shard_<n>` (dropped again by
 * {@link endSourcePools}), its own small pool.
 */
export async function mysqlSource(raw: RawDatabase) {
  const pool = mysql.createPool({ uri: raw.url, connectionLimit: 2, ...BIG_NUMBER_OPTIONS })
  const schemaPrefix = `${new URL(raw.url).pathname.slice(1)}_shard_`
  pools.push({
    async end() {
      for (const shard of shards)
        await pool.query(`DROP DATABASE IF EXISTS \`${schemaPrefix}${shard}\``)
      await pool.end()
    },
  })
  await installMysqlShards(pool, { layout: instagram, shards, schemaPrefix })
  return new MysqlSource({ layout: instagram, pool, shards, schemaPrefix, logicalShards })
}

/**
 * A `RedisSource` on the shared Redis (`REDIS_URL`) under its own key prefix (its keys deleted
 * again by {@link endSourcePools}).
 */
export function redisSource(keyPrefix: string) {
  const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
  const source = new RedisSource({ layout: instagram, servers: url, keyPrefix, logicalShards })
  pools.push({
    async end() {
      await source.close()
      const client = new Redis(url)
      try {
        const keys = await client.keys(`${keyPrefix}*`)
        if (keys.length > 0) await client.del(...keys)
      } finally {
        client.disconnect()
      }
    },
  })
  return source
}

/**
 * Flickr-style `TicketServerSource` over two ticket databases `<test database>_tix_a` / `_b` on
 * the test server, offsets 1 and 2 (dropped again by {@link endSourcePools}).
 */
export async function ticketSource(raw: RawDatabase) {
  const pool = mysql.createPool({ uri: raw.url, connectionLimit: 2, ...BIG_NUMBER_OPTIONS })
  const prefix = `${new URL(raw.url).pathname.slice(1)}_tix_`
  const databases = [`${prefix}a`, `${prefix}b`]
  pools.push({
    async end() {
      for (const db of databases) await pool.query(`DROP DATABASE IF EXISTS \`${db}\``)
      await pool.end()
    },
  })
  const source = new TicketServerSource({
    servers: databases.map((database) => ({ pool, database })),
    sequence: 'blog',
  })
  await source.install()
  return source
}

/** Ends the pools of the sources made here. */
export async function endSourcePools(): Promise<void> {
  await Promise.all(pools.splice(0).map((pool) => pool.end()))
}
