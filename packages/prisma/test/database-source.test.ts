import { describeAdapter, describePlainIdAdapter } from '@shardflake/conformance'
import { afterAll } from 'vitest'
import { blogOnPrisma } from './support/blog'
import {
  endSourcePools,
  logicalShards,
  mysqlSource,
  postgresSource,
  redisSource,
  ticketSource,
} from './support/sources'

afterAll(endSourcePools)

describeAdapter('Prisma / PostgreSQL / PostgresSource', {
  dialect: 'postgres',
  database: 'sf_prisma_pg_dbsource',
  logicalShards,
  createSource: (raw) => postgresSource(raw),
  setup: async ({ source, raw }) => blogOnPrisma('postgres', raw.url, source),
})

describeAdapter('Prisma / PostgreSQL / PostgresSource with prefetch', {
  dialect: 'postgres',
  database: 'sf_prisma_pg_prefetch',
  logicalShards,
  createSource: (raw) => postgresSource(raw, { size: 64 }),
  setup: async ({ source, raw }) => blogOnPrisma('postgres', raw.url, source),
})

describeAdapter('Prisma / MariaDB / MysqlSource', {
  dialect: 'mysql',
  database: 'sf_prisma_my_dbsource',
  logicalShards,
  createSource: (raw) => mysqlSource(raw),
  setup: async ({ source, raw }) => blogOnPrisma('mysql', raw.url, source),
})

describeAdapter('Prisma / PostgreSQL / RedisSource', {
  dialect: 'postgres',
  database: 'sf_prisma_pg_redis',
  logicalShards,
  createSource: () => redisSource('sf:prisma:pg:'),
  setup: async ({ source, raw }) => blogOnPrisma('postgres', raw.url, source),
})

describeAdapter('Prisma / MariaDB / RedisSource', {
  dialect: 'mysql',
  database: 'sf_prisma_my_redis',
  logicalShards,
  createSource: () => redisSource('sf:prisma:my:'),
  setup: async ({ source, raw }) => blogOnPrisma('mysql', raw.url, source),
})

describePlainIdAdapter('Prisma / MariaDB / TicketServerSource', {
  dialect: 'mysql',
  database: 'sf_prisma_my_tickets',
  createSource: (raw) => ticketSource(raw),
  setup: async ({ source, raw }) => blogOnPrisma('mysql', raw.url, source),
})
