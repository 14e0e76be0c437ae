import { describeAdapter } from '@shardflake/conformance'
import { InProcessSource, instagram } from '@shardflake/core'
import { mikroBlog } from './support/blog'
import { definedBlog } from './support/entities-define'
import { legacyBlog } from './support/entities-legacy'
import { postgresSource } from './support/sources'

describeAdapter('MikroORM / PostgreSQL / in-process / legacy decorators', {
  dialect: 'postgres',
  database: 'sf_mikro_pg_inproc_legacy',
  postsFollowAuthor: true,
  createSource: () => new InProcessSource({ layout: instagram, shards: 'all' }),
  setup: (context) => mikroBlog('postgres', legacyBlog, context),
})

describeAdapter('MikroORM / PostgreSQL / PostgresSource / defineEntity', {
  dialect: 'postgres',
  database: 'sf_mikro_pg_db_define',
  postsFollowAuthor: true,
  logicalShards: 16,
  createSource: (raw) => postgresSource(raw, 16),
  setup: (context) => mikroBlog('postgres', definedBlog, context),
})
