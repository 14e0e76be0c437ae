import { describeAdapter } from '@shardflake/conformance'
import { InProcessSource, instagram } from '@shardflake/core'
import { mikroBlog } from './support/blog'
import { definedBlog } from './support/entities-define'
import { legacyBlog } from './support/entities-legacy'
import { mysqlSource } from './support/sources'

describeAdapter('MikroORM / MariaDB / in-process / defineEntity', {
  dialect: 'mysql',
  database: 'sf_mikro_my_inproc_define',
  postsFollowAuthor: true,
  createSource: () => new InProcessSource({ layout: instagram, shards: 'all' }),
  setup: (context) => mikroBlog('mysql', definedBlog, context),
})

describeAdapter('MikroORM / MariaDB / MysqlSource / legacy decorators', {
  dialect: 'mysql',
  database: 'sf_mikro_my_db_legacy',
  postsFollowAuthor: true,
  logicalShards: 8,
  createSource: (raw) => mysqlSource(raw, 'sf_mikro_my_legacy_s', 8),
  setup: (context) => mikroBlog('mysql', legacyBlog, context),
})
