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

describeAdapter('TypeORM 1.x / PostgreSQL / in-process, bigint IDs', {
  dialect: 'postgres',
  database: 'sf_typeorm_pg_bigint',
  createSource: () => new InProcessSource({ layout: instagram, shards: 'all' }),
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source, { idType: 'bigint' }),
})

describeAdapter('TypeORM 1.x / PostgreSQL / async in-process, posts follow their author', {
  dialect: 'postgres',
  database: 'sf_typeorm_pg_follow',
  postsFollowAuthor: true,
  createSource: () => asAsync(new InProcessSource({ layout: instagram, shards: 'all' })),
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source, { postsFollowAuthor: true }),
})
