import { describeAdapter } from '@shardflake/conformance'
import { InProcessSource, instagram } from '@shardflake/core'
import { asAsync, blogOnTypeorm } from './blog'

describeAdapter('TypeORM 1.x / PostgreSQL / in-process', {
  dialect: 'postgres',
  database: 'sf_typeorm_pg_inproc',
  createSource: () => new InProcessSource({ layout: instagram, shards: 'all' }),
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source),
})

describeAdapter('TypeORM 1.x / PostgreSQL / async in-process', {
  dialect: 'postgres',
  database: 'sf_typeorm_pg_async',
  createSource: () => asAsync(new InProcessSource({ layout: instagram, shards: 'all' })),
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source),
})
