import { describeAdapter, describePlainIdAdapter, testSharding } from '@shardflake/conformance'
import { afterAll } from 'vitest'
import { blogOnPrisma } from './support/blog'
import {
  endSourcePools,
  mysqlSource,
  postgresSource,
  redisSource,
  ticketSource,
} from './support/sources'

afterAll(endSourcePools)

// Each logical shard is a schema or database to install: eight keep the setup short.
const sharding = testSharding(8)

describeAdapter('Prisma / PostgreSQL / PostgresSource', {
  dialect: 'postgres',
  database: 'sf_prisma_pg_dbsource',
  sharding,
  createSource: (raw, sharding) => postgresSource(raw, sharding),
  setup: async ({ source, raw }) => blogOnPrisma('postgres', raw.url, source),
})

describeAdapter('Prisma / PostgreSQL / PostgresSource with prefetch', {
  dialect: 'postgres',
  database: 'sf_prisma_pg_prefetch',
  sharding,
  createSource: (raw, sharding) => postgresSource(raw, sharding, { size: 64 }),
  setup: async ({ source, raw }) => blogOnPrisma('postgres', raw.url, source),
})

describeAdapter('Prisma / MariaDB / MysqlSource', {
  dialect: 'mysql',
  database: 'sf_prisma_my_dbsource',
  sharding,
  createSource: (raw, sharding) => mysqlSource(raw, sharding),
  setup: async ({ source, raw }) => blogOnPrisma('mysql', raw.url, source),
})

describeAdapter('Prisma / PostgreSQL / RedisSource', {
  dialect: 'postgres',
  database: 'sf_prisma_pg_redis',
  sharding,
  createSource: (_raw, sharding) => redisSource(sharding, 'pg'),
  setup: async ({ source, raw }) => blogOnPrisma('postgres', raw.url, source),
})

describeAdapter('Prisma / MariaDB / RedisSource', {
  dialect: 'mysql',
  database: 'sf_prisma_my_redis',
  sharding,
  createSource: (_raw, sharding) => redisSource(sharding, 'my'),
  setup: async ({ source, raw }) => blogOnPrisma('mysql', raw.url, source),
})

describePlainIdAdapter('Prisma / MariaDB / TicketServerSource', {
  dialect: 'mysql',
  database: 'sf_prisma_my_tickets',
  createSource: (raw) => ticketSource(raw),
  setup: async ({ source, raw }) => blogOnPrisma('mysql', raw.url, source),
})
