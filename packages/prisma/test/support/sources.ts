import { mysqlUrl, type RawDatabase, runTag } from '@shardflake/conformance'
import type { PrefetchOptions, Sharding } from '@shardflake/core'
import {
  BIG_NUMBER_OPTIONS,
  installMysql,
  installTicketServers,
  MysqlSource,
  TicketServerSource,
} from '@shardflake/mysql'
import { installPostgres, PostgresSource } from '@shardflake/postgres'
import { RedisSource } from '@shardflake/redis'
import { Redis } from 'ioredis'
import mysql from 'mysql2/promise'
import pg from 'pg'

/** What the sources made here leave behind, dropped by {@link endSourcePools}. */
const cleanups: (() => Promise<void>)[] = []

/**
 * A `PostgresSource` on the test database, with `next_id()` installed for every logical shard.
 * It opens its own pool from the URL (never Prisma's connections) and ends it on `close()`.
 */
export async function postgresSource(
  raw: RawDatabase,
  sharding: Sharding,
  prefetch?: PrefetchOptions,
) {
  const installer = new pg.Client({ connectionString: raw.url })
  await installer.connect()
  try {
    await installPostgres(installer, { sharding, shards: 'all' })
  } finally {
    await installer.end()
  }
  return new PostgresSource({ sharding, databases: raw.url, ...(prefetch && { prefetch }) })
}

/**
 * A `MysqlSource` with its routines in databases `<test database>_shard_<n>` (dropped again by
 * {@link endSourcePools}), its own small pool.
 */
export async function mysqlSource(raw: RawDatabase, sharding: Sharding) {
  const schemaPrefix = `${new URL(raw.url).pathname.slice(1)}_shard_`
  const admin = () => mysql.createPool({ uri: raw.url, connectionLimit: 1, ...BIG_NUMBER_OPTIONS })
  cleanups.push(async () => {
    // the test database is gone by now: connect to the server's default one
    const pool = mysql.createPool({ uri: mysqlUrl(), connectionLimit: 1 })
    for (let shard = 0; shard < sharding.logicalShards; shard++) {
      await pool.query(`DROP DATABASE IF EXISTS \`${schemaPrefix}${shard}\``)
    }
    await pool.end()
  })
  const installer = admin()
  try {
    await installMysql(installer, { sharding, shards: 'all', schemaPrefix })
  } finally {
    await installer.end()
  }
  return new MysqlSource({ sharding, databases: raw.url, schemaPrefix })
}

/** A `RedisSource` on the shared Redis (`REDIS_URL`) under a key prefix of this run. */
export function redisSource(sharding: Sharding, name: string) {
  const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
  const keyPrefix = `sf:prisma:${name}:${runTag()}:`
  const source = new RedisSource({ sharding, servers: url, keyPrefix })
  cleanups.push(async () => {
    await source.close()
    const client = new Redis(url)
    try {
      const keys = await client.keys(`${keyPrefix}*`)
      if (keys.length > 0) await client.del(...keys)
    } finally {
      client.disconnect()
    }
  })
  return source
}

/**
 * Flickr-style `TicketServerSource` over two ticket databases `<test database>_tix_a` / `_b` on
 * the test server, offsets 1 and 2 (dropped again by {@link endSourcePools}).
 */
export async function ticketSource(raw: RawDatabase) {
  const pool = mysql.createPool({ uri: mysqlUrl(), connectionLimit: 2, ...BIG_NUMBER_OPTIONS })
  const prefix = `${new URL(raw.url).pathname.slice(1)}_tix_`
  const servers = [`${prefix}a`, `${prefix}b`].map((database) => ({ pool, database }))
  cleanups.push(async () => {
    for (const { database } of servers) await pool.query(`DROP DATABASE IF EXISTS \`${database}\``)
    await pool.end()
  })
  await installTicketServers({ servers, sequence: 'blog' })
  return new TicketServerSource({ servers, sequence: 'blog' })
}

/** Ends the pools of the sources made here and drops what they installed outside the test database. */
export async function endSourcePools(): Promise<void> {
  for (const cleanup of cleanups.splice(0)) await cleanup()
}
