/**
 * The database-backed sources the conformance suite runs Drizzle with, each made with the suite's
 * sharding, on the suite's database, closing what it opened.
 */
import { type RawDatabase, runTag, testLeasedSharding, withClose } from '@shardflake/conformance'
import { type IdSource, LeasedSource, type Sharding } from '@shardflake/core'
import {
  createMysqlPool,
  installMysql,
  installTicketServers,
  MysqlLeaseRegistry,
  MysqlSource,
  TicketServerSource,
} from '@shardflake/mysql'
import { installPostgres, PostgresLeaseRegistry, PostgresSource } from '@shardflake/postgres'
import { RedisSource } from '@shardflake/redis'
import { Redis } from 'ioredis'
import pg from 'pg'

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

/** `PostgresSource` over `next_id()` of every logical shard, installed in the suite's database. */
export async function postgresSource(raw: RawDatabase, sharding: Sharding): Promise<IdSource> {
  const pool = new pg.Pool({ connectionString: raw.url, max: 4 })
  pool.on('error', () => undefined) // an idle connection ended by the server
  await installPostgres(pool, { sharding, shards: 'all' })
  const source = new PostgresSource({ sharding, databases: pool })
  return withClose(source, () => pool.end())
}

/** `MysqlSource` over the routines of every logical shard, one database `${prefix}<n>` each. */
export async function mysqlSource(
  raw: RawDatabase,
  sharding: Sharding,
  name: string,
): Promise<IdSource> {
  const schemaPrefix = `sf_drizzle_${name}_${runTag()}_`
  const pool = await createMysqlPool({ uri: raw.url, connectionLimit: 4 })
  await installMysql(pool, { sharding, shards: 'all', schemaPrefix })
  const source = new MysqlSource({ sharding, databases: pool, schemaPrefix })
  return withClose(source, async () => {
    await dropDatabases(pool, schemaPrefix)
    await pool.end()
  })
}

/** `RedisSource` on the shared Redis under a key prefix of this run, deleted on close. */
export function redisSource(sharding: Sharding, name: string): IdSource {
  const keyPrefix = `sf:drizzle:${runTag()}:${name}:`
  const source = new RedisSource({ sharding, servers: redisUrl, keyPrefix })
  return withClose(source, async () => {
    const client = new Redis(redisUrl)
    try {
      const keys = await client.keys(`${keyPrefix}*`)
      if (keys.length > 0) await client.del(...keys)
    } finally {
      client.disconnect()
    }
  })
}

/**
 * Flickr-style `TicketServerSource` over two ticket databases on the suite's server (odds and
 * evens), dropped on close.
 */
export async function ticketSource(raw: RawDatabase, name: string): Promise<IdSource> {
  const prefix = `sf_drizzle_${name}_${runTag()}_`
  const pool = await createMysqlPool({ uri: raw.url, connectionLimit: 8 })
  const options = {
    servers: [
      { pool, database: `${prefix}a` },
      { pool, database: `${prefix}b` },
    ],
    sequence: 'blog',
  }
  await installTicketServers(options)
  const source = new TicketServerSource(options)
  return withClose(source, async () => {
    await dropDatabases(pool, prefix)
    await pool.end()
  })
}

async function dropDatabases(
  pool: Awaited<ReturnType<typeof createMysqlPool>>,
  prefix: string,
): Promise<void> {
  const [rows] = await pool.query('SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA')
  for (const row of rows as { name: string }[]) {
    if (row.name.startsWith(prefix)) await pool.query(`DROP DATABASE \`${row.name}\``)
  }
}

/** A sharding whose layout has worker bits, for leased sources. */
export const leasedSharding = testLeasedSharding(4)

/**
 * `LeasedSource` with its worker leased from a registry in the suite's database (PostgreSQL) or
 * server (MariaDB); acquired before the first insert, released on close.
 */
export async function leasedSource(raw: RawDatabase, sharding: Sharding): Promise<IdSource> {
  if (raw.dialect === 'postgres') {
    const pool = new pg.Pool({ connectionString: raw.url, max: 2 })
    pool.on('error', () => undefined) // an idle connection ended by the server
    const source = await LeasedSource.start({ sharding, registry: new PostgresLeaseRegistry(pool) })
    return withClose(source, () => pool.end())
  }
  const database = `sf_drizzle_leases_${runTag()}`
  const pool = await createMysqlPool({ uri: raw.url, connectionLimit: 2 })
  const source = await LeasedSource.start({
    sharding,
    registry: new MysqlLeaseRegistry(pool, { database }),
  })
  return withClose(source, async () => {
    await pool.query(`DROP DATABASE IF EXISTS \`${database}\``)
    await pool.end()
  })
}
