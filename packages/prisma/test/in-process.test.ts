import { describeAdapter } from '@shardflake/conformance'
import { InProcessSource, instagram } from '@shardflake/core'
import { blogOnPrisma } from './support/blog'

const inProcess = () => new InProcessSource({ layout: instagram, shards: 'all' })

describeAdapter('Prisma / PostgreSQL / in-process', {
  dialect: 'postgres',
  database: 'sf_prisma_pg_inproc',
  createSource: inProcess,
  setup: async ({ source, raw }) => blogOnPrisma('postgres', raw.url, source),
})

describeAdapter('Prisma / MariaDB / in-process', {
  dialect: 'mysql',
  database: 'sf_prisma_my_inproc',
  createSource: inProcess,
  setup: async ({ source, raw }) => blogOnPrisma('mysql', raw.url, source),
})
