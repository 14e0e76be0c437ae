/** Database sources on TypeORM 0.3 (every `typeorm` import is 0.3.x here). */
import { describeAdapter } from '@shardflake/conformance'
import { vi } from 'vitest'
import { blogOnTypeorm } from './blog'
import { mysqlSource, postgresSource, redisSource } from './sources'

vi.mock('typeorm', () => import('typeorm-03'))

describeAdapter('TypeORM 0.3 / PostgreSQL / PostgresSource', {
  dialect: 'postgres',
  database: 'sf_typeorm_03_pg_dbsource',
  createSource: postgresSource,
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source),
})

describeAdapter('TypeORM 0.3 / MariaDB / MysqlSource', {
  dialect: 'mysql',
  database: 'sf_typeorm_03_my_dbsource',
  logicalShards: 8,
  createSource: (raw) => mysqlSource(raw, 'sf_typeorm_s03_'),
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source),
})

describeAdapter(
  'TypeORM 0.3 / PostgreSQL / PostgresSource, bigint IDs, posts follow their author',
  {
    dialect: 'postgres',
    database: 'sf_typeorm_03_pg_dbsource_bf',
    postsFollowAuthor: true,
    createSource: postgresSource,
    setup: async ({ raw, source }) =>
      blogOnTypeorm(raw, source, { idType: 'bigint', postsFollowAuthor: true }),
  },
)

describeAdapter('TypeORM 0.3 / MariaDB / MysqlSource, bigint IDs, posts follow their author', {
  dialect: 'mysql',
  database: 'sf_typeorm_03_my_dbsource_bf',
  logicalShards: 8,
  postsFollowAuthor: true,
  createSource: (raw) => mysqlSource(raw, 'sf_typeorm_s032_'),
  setup: async ({ raw, source }) =>
    blogOnTypeorm(raw, source, { idType: 'bigint', postsFollowAuthor: true }),
})

describeAdapter('TypeORM 0.3 / PostgreSQL / RedisSource', {
  dialect: 'postgres',
  database: 'sf_typeorm_03_pg_redis',
  createSource: () => redisSource('sf:typeorm_03:pg:'),
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source),
})

describeAdapter('TypeORM 0.3 / MariaDB / RedisSource, bigint IDs, posts follow their author', {
  dialect: 'mysql',
  database: 'sf_typeorm_03_my_redis_bf',
  postsFollowAuthor: true,
  createSource: () => redisSource('sf:typeorm_03:my:'),
  setup: async ({ raw, source }) =>
    blogOnTypeorm(raw, source, { idType: 'bigint', postsFollowAuthor: true }),
})
