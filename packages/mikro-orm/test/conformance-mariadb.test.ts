import { describeAdapter } from '@shardflake/conformance'
import { InProcessSource, instagram } from '@shardflake/core'
import { mikroBlog } from './support/blog'
import { definedBlog } from './support/entities-define'

describeAdapter('MikroORM / MariaDB / in-process / defineEntity', {
  dialect: 'mysql',
  database: 'sf_mikro_my_inproc_define',
  postsFollowAuthor: true,
  createSource: () => new InProcessSource({ layout: instagram, shards: 'all' }),
  setup: (context) => mikroBlog('mysql', definedBlog, context),
})
