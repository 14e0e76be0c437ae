import { describeAdapter } from '@shardflake/conformance'
import { InProcessSource, instagram } from '@shardflake/core'
import { mikroBlog } from '../support/blog'
import { postgresSource } from '../support/sources'
import { esBlog } from './entities-es'

describeAdapter('MikroORM / MariaDB / in-process / standard decorators', {
  dialect: 'mysql',
  database: 'sf_mikro_my_inproc_es',
  postsFollowAuthor: true,
  createSource: () => new InProcessSource({ layout: instagram, shards: 'all' }),
  setup: (context) => mikroBlog('mysql', esBlog, context),
})

describeAdapter('MikroORM / PostgreSQL / PostgresSource / standard decorators', {
  dialect: 'postgres',
  database: 'sf_mikro_pg_db_es',
  postsFollowAuthor: true,
  logicalShards: 16,
  createSource: (raw) => postgresSource(raw, 16),
  setup: (context) => mikroBlog('postgres', esBlog, context),
})
