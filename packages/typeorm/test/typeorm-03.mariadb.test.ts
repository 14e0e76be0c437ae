/** The same suite on TypeORM 0.3: every `typeorm` import (adapter and entities) is 0.3.x here. */
import { describeAdapter } from '@shardflake/conformance'
import { InProcessSource, instagram } from '@shardflake/core'
import { expect, it, vi } from 'vitest'
import { asAsync, blogOnTypeorm } from './blog'

vi.mock('typeorm', () => import('typeorm-03'))

it('runs on TypeORM 0.3', async () => {
  const typeorm = await import('typeorm')
  expect(typeorm.DataSource).toBe((await import('typeorm-03')).DataSource)
})

describeAdapter('TypeORM 0.3 / MariaDB / in-process', {
  dialect: 'mysql',
  database: 'sf_typeorm_03_my_inproc',
  createSource: () => new InProcessSource({ layout: instagram, shards: 'all' }),
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source),
})

describeAdapter('TypeORM 0.3 / MariaDB / async in-process', {
  dialect: 'mysql',
  database: 'sf_typeorm_03_my_async',
  createSource: () => asAsync(new InProcessSource({ layout: instagram, shards: 'all' })),
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source),
})

describeAdapter('TypeORM 0.3 / MariaDB / in-process, bigint IDs', {
  dialect: 'mysql',
  database: 'sf_typeorm_03_my_bigint',
  createSource: () => new InProcessSource({ layout: instagram, shards: 'all' }),
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source, { idType: 'bigint' }),
})

describeAdapter('TypeORM 0.3 / MariaDB / async in-process, posts follow their author', {
  dialect: 'mysql',
  database: 'sf_typeorm_03_my_follow',
  postsFollowAuthor: true,
  createSource: () => asAsync(new InProcessSource({ layout: instagram, shards: 'all' })),
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source, { postsFollowAuthor: true }),
})
