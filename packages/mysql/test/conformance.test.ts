import { describeIdSource } from '@shardflake/conformance'
import { instagram } from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { installMysqlShards, MysqlSource, TicketServerSource } from '../src'
import { createPool, dropDatabases } from './helpers'

const MYSQL_PREFIX = 'sf_my_conf_shard_'
const TICKETS = 'sf_my_conf_tix_'

let sourcePool: Pool
describeIdSource('MysqlSource (MariaDB routines)', {
  create: async () => {
    sourcePool = createPool(undefined, { connectionLimit: 16 })
    await dropDatabases(sourcePool, MYSQL_PREFIX)
    await installMysqlShards(sourcePool, {
      layout: instagram,
      shards: [5, 1341],
      schemaPrefix: MYSQL_PREFIX,
    })
    return new MysqlSource({
      layout: instagram,
      pool: sourcePool,
      shards: { from: 0, to: 1999 },
      schemaPrefix: MYSQL_PREFIX,
    })
  },
  shards: [5, 1341],
  foreignShard: 2000,
  concurrency: 32,
  largeBatch: 100_000,
  teardown: async () => {
    await dropDatabases(sourcePool, MYSQL_PREFIX)
    await sourcePool.end()
  },
})

let prefetchPool: Pool
describeIdSource('MysqlSource with a prefetch buffer', {
  create: async () => {
    prefetchPool = createPool(undefined, { connectionLimit: 8 })
    await dropDatabases(prefetchPool, `${MYSQL_PREFIX}pf_`)
    await installMysqlShards(prefetchPool, {
      layout: instagram,
      shards: [5, 1341],
      schemaPrefix: `${MYSQL_PREFIX}pf_`,
    })
    return new MysqlSource({
      layout: instagram,
      pool: prefetchPool,
      shards: { from: 0, to: 1999 },
      schemaPrefix: `${MYSQL_PREFIX}pf_`,
      prefetch: { size: 500 },
    })
  },
  shards: [5, 1341],
  foreignShard: 2000,
  maxAgeMs: 1000,
  teardown: async () => {
    await dropDatabases(prefetchPool, `${MYSQL_PREFIX}pf_`)
    await prefetchPool.end()
  },
})

let ticketPool: Pool
describeIdSource('TicketServerSource (two ticket databases, odd/even)', {
  create: async () => {
    ticketPool = createPool(undefined, { connectionLimit: 16 })
    await dropDatabases(ticketPool, TICKETS)
    const source = new TicketServerSource({
      servers: [
        { pool: ticketPool, database: `${TICKETS}a` },
        { pool: ticketPool, database: `${TICKETS}b` },
      ],
      sequence: 'photos',
      logicalShards: 2000,
    })
    await source.install()
    return source
  },
  shards: [5, 1341],
  foreignShard: 2000,
  decodable: false,
  teardown: async () => {
    await dropDatabases(ticketPool, TICKETS)
    await ticketPool.end()
  },
})
