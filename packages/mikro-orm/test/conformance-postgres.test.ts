import { describeAdapter } from '@shardflake/conformance'
import { InProcessSource, instagram } from '@shardflake/core'
import { mikroBlog } from './support/blog'
import { legacyBlog } from './support/entities-legacy'

describeAdapter('MikroORM / PostgreSQL / in-process / legacy decorators', {
  dialect: 'postgres',
  database: 'sf_mikro_pg_inproc_legacy',
  postsFollowAuthor: true,
  createSource: () => new InProcessSource({ layout: instagram, shards: 'all' }),
  setup: (context) => mikroBlog('postgres', legacyBlog, context),
})
