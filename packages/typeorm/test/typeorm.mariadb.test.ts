import { describeAdapter } from '@shardflake/conformance'
import { InProcessSource, instagram } from '@shardflake/core'
import { asAsync, blogOnTypeorm } from './blog'

describeAdapter('TypeORM 1.x / MariaDB / in-process', {
  dialect: 'mysql',
  database: 'sf_typeorm_my_inproc',
  createSource: () => new InProcessSource({ layout: instagram, shards: 'all' }),
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source),
})

describeAdapter('TypeORM 1.x / MariaDB / async in-process', {
  dialect: 'mysql',
  database: 'sf_typeorm_my_async',
  createSource: () => asAsync(new InProcessSource({ layout: instagram, shards: 'all' })),
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source),
})

describeAdapter('TypeORM 1.x / MariaDB / in-process, bigint IDs', {
  dialect: 'mysql',
  database: 'sf_typeorm_my_bigint',
  createSource: () => new InProcessSource({ layout: instagram, shards: 'all' }),
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source, { idType: 'bigint' }),
})

describeAdapter('TypeORM 1.x / MariaDB / async in-process, posts follow their author', {
  dialect: 'mysql',
  database: 'sf_typeorm_my_follow',
  postsFollowAuthor: true,
  createSource: () => asAsync(new InProcessSource({ layout: instagram, shards: 'all' })),
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source, { postsFollowAuthor: true }),
})
