/**
 * Every kind of source the conformance matrix runs Sequelize with, each made with the suite's
 * sharding and closing what it opened. Database sources keep their IDs in a database of their
 * own server, whichever server holds the blog's rows.
 */
import {
  freshDatabase,
  mysqlUrl,
  type RawDatabase,
  runTag,
  testLeasedSharding,
  withClose,
} from '@shardflake/conformance'
import { type IdSource, InProcessSource, LeasedSource, type Sharding } from '@shardflake/core'
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

export type SourceMaker = (raw: RawDatabase, sharding: Sharding) => Promise<IdSource> | IdSource

/** `InProcessSource` for every logical shard. */
export const inProcessSource: SourceMaker = (_raw, sharding) =>
  new InProcessSource({ sharding, shards: 'all' })

/** `next_id()` of every logical shard in a PostgreSQL database of its own. */
export const postgresSource: SourceMaker = async (raw, sharding) => {
  const ids = await freshDatabase('postgres', `${raw.name.slice(0, 30)}_i`)
  const pool = new pg.Pool({ connectionString: ids.url, max: 4 })
  pool.on('error', () => undefined) // an idle connection ended by the server
  await installPostgres(pool, { sharding, shards: 'all' })
  const source = new PostgresSource({ sharding, databases: pool })
  return withClose(source, async () => {
    await pool.end()
    await ids.close()
  })
}

/** The MariaDB routines of every logical shard, one database `<prefix><n>` each (keep shardings small). */
export const mysqlSource: SourceMaker = async (raw, sharding) => {
  const schemaPrefix = `${raw.name.slice(0, 30)}_s`
  const pool = await createMysqlPool({ uri: mysqlUrl(), connectionLimit: 4 })
  await installMysql(pool, { sharding, shards: 'all', schemaPrefix })
  const source = new MysqlSource({ sharding, databases: pool, schemaPrefix })
  return withClose(source, async () => {
    for (let shard = 0; shard < sharding.logicalShards; shard++) {
      await pool.query(`DROP DATABASE IF EXISTS \`${schemaPrefix}${shard}\``)
    }
    await pool.end()
  })
}

/** `RedisSource` on the shared Redis under a key prefix of its own, deleted on close. */
export const redisSource: SourceMaker = (raw, sharding) => {
  const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
  const keyPrefix = `sf:sequelize:${raw.name}:`
  const source = new RedisSource({ sharding, servers: url, keyPrefix })
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

/** A sharding whose layout has worker bits, for leased sources. */
export const leasedSharding = testLeasedSharding(4)

/** `LeasedSource` with its worker leased from a registry on the server that holds the rows. */
export const leasedSource: SourceMaker = async (raw, sharding) => {
  if (raw.dialect === 'postgres') {
    const pool = new pg.Pool({ connectionString: raw.url, max: 2 })
    pool.on('error', () => undefined)
    const source = await LeasedSource.start({ sharding, registry: new PostgresLeaseRegistry(pool) })
    return withClose(source, () => pool.end())
  }
  const database = `sf_sequelize_leases_${runTag()}`
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

/** Flickr-style ticket servers: two databases on the MariaDB server (odds and evens), dropped on close. */
export async function ticketSource(raw: RawDatabase): Promise<IdSource> {
  const prefix = `${raw.name.slice(0, 30)}_t`
  const pool = await createMysqlPool({ uri: mysqlUrl(), connectionLimit: 8 })
  const servers = ['a', 'b'].map((suffix) => ({ pool, database: `${prefix}${suffix}` }))
  for (const { database } of servers) await pool.query(`DROP DATABASE IF EXISTS \`${database}\``)
  await installTicketServers({ servers, sequence: 'blog' })
  const source = new TicketServerSource({ servers, sequence: 'blog' })
  return withClose(source, async () => {
    for (const { database } of servers) await pool.query(`DROP DATABASE IF EXISTS \`${database}\``)
    await pool.end()
  })
}
