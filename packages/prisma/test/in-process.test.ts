import { describeAdapter } from '@shardflake/conformance'
import { InProcessSource } from '@shardflake/core'
import { blogOnPrisma } from './support/blog'

describeAdapter('Prisma / PostgreSQL / in-process', {
  dialect: 'postgres',
  database: 'sf_prisma_pg_inproc',
  createSource: (_raw, sharding) => new InProcessSource({ sharding, shards: 'all' }),
  setup: async ({ source, raw }) => blogOnPrisma('postgres', raw.url, source),
})

describeAdapter('Prisma / MariaDB / in-process', {
  dialect: 'mysql',
  database: 'sf_prisma_my_inproc',
  createSource: (_raw, sharding) => new InProcessSource({ sharding, shards: 'all' }),
  setup: async ({ source, raw }) => blogOnPrisma('mysql', raw.url, source),
})
