import { describeAdapter } from '@shardflake/conformance'
import { blogOnTypeorm } from './blog'
import { mysqlSource, postgresSource, redisSource } from './sources'

describeAdapter('TypeORM 1.x / PostgreSQL / PostgresSource', {
  dialect: 'postgres',
  database: 'sf_typeorm_pg_dbsource',
  createSource: postgresSource,
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source),
})

describeAdapter('TypeORM 1.x / MariaDB / MysqlSource', {
  dialect: 'mysql',
  database: 'sf_typeorm_my_dbsource',
  logicalShards: 8,
  createSource: (raw) => mysqlSource(raw, 'sf_typeorm_s1_'),
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source),
})

describeAdapter(
  'TypeORM 1.x / PostgreSQL / PostgresSource, bigint IDs, posts follow their author',
  {
    dialect: 'postgres',
    database: 'sf_typeorm_pg_dbsource_bf',
    postsFollowAuthor: true,
    createSource: postgresSource,
    setup: async ({ raw, source }) =>
      blogOnTypeorm(raw, source, { idType: 'bigint', postsFollowAuthor: true }),
  },
)

describeAdapter('TypeORM 1.x / MariaDB / MysqlSource, bigint IDs, posts follow their author', {
  dialect: 'mysql',
  database: 'sf_typeorm_my_dbsource_bf',
  logicalShards: 8,
  postsFollowAuthor: true,
  createSource: (raw) => mysqlSource(raw, 'sf_typeorm_s2_'),
  setup: async ({ raw, source }) =>
    blogOnTypeorm(raw, source, { idType: 'bigint', postsFollowAuthor: true }),
})

describeAdapter('TypeORM 1.x / PostgreSQL / RedisSource', {
  dialect: 'postgres',
  database: 'sf_typeorm_pg_redis',
  createSource: () => redisSource('sf:typeorm:pg:'),
  setup: async ({ raw, source }) => blogOnTypeorm(raw, source),
})

describeAdapter('TypeORM 1.x / MariaDB / RedisSource, bigint IDs, posts follow their author', {
  dialect: 'mysql',
  database: 'sf_typeorm_my_redis_bf',
  postsFollowAuthor: true,
  createSource: () => redisSource('sf:typeorm:my:'),
  setup: async ({ raw, source }) =>
    blogOnTypeorm(raw, source, { idType: 'bigint', postsFollowAuthor: true }),
})
