import { describeIdSource } from '@shardflake/conformance'
import { defineSharding, instagram } from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { installMysql, installTicketServers, MysqlSource, TicketServerSource } from '../src'
import { createPool, dropDatabases, RUN } from './helpers'

const MYSQL_PREFIX = `sf_my_conf_${RUN}_s_`
const TICKETS = `sf_my_conf_${RUN}_tix_`
const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })

let sourcePool: Pool
describeIdSource('MysqlSource (MariaDB routines)', {
  sharding,
  create: async () => {
    sourcePool = createPool(undefined, { connectionLimit: 16 })
    await dropDatabases(sourcePool, MYSQL_PREFIX)
    await installMysql(sourcePool, { sharding, shards: [5, 1341], schemaPrefix: MYSQL_PREFIX })
    return new MysqlSource({ sharding, databases: sourcePool, schemaPrefix: MYSQL_PREFIX })
  },
  createWithoutSharding: () =>
    new MysqlSource({ databases: sourcePool, schemaPrefix: MYSQL_PREFIX } as never),
  createWithOtherSharding: () =>
    new MysqlSource({
      sharding: defineSharding({ layout: instagram, logicalShards: 4096 }),
      databases: sourcePool,
      schemaPrefix: MYSQL_PREFIX,
    }),
  shards: [5, 1341],
  concurrency: 32,
  largeBatch: 100_000,
  teardown: async () => {
    await dropDatabases(sourcePool, MYSQL_PREFIX)
    await sourcePool.end()
  },
})

let prefetchPool: Pool
describeIdSource('MysqlSource with a prefetch buffer', {
  sharding,
  create: async () => {
    prefetchPool = createPool(undefined, { connectionLimit: 8 })
    await dropDatabases(prefetchPool, `${MYSQL_PREFIX}pf_`)
    await installMysql(prefetchPool, {
      sharding,
      shards: [5, 1341],
      schemaPrefix: `${MYSQL_PREFIX}pf_`,
    })
    return new MysqlSource({
      sharding,
      databases: prefetchPool,
      schemaPrefix: `${MYSQL_PREFIX}pf_`,
      prefetch: { size: 500 },
    })
  },
  shards: [5, 1341],
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
    const options = {
      servers: [
        { pool: ticketPool, database: `${TICKETS}a` },
        { pool: ticketPool, database: `${TICKETS}b` },
      ],
      sequence: 'photos',
    }
    await installTicketServers(options)
    return new TicketServerSource(options)
  },
  shards: [5, 1341],
  foreignShard: -1,
  teardown: async () => {
    await dropDatabases(ticketPool, TICKETS)
    await ticketPool.end()
  },
})
