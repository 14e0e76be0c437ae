/**
 * The adapter conformance suite on MikroORM 6.6: {PostgreSQL, MariaDB} x {in-process, database
 * source} x {legacy decorators from @mikro-orm/core, defineEntity}, checked through raw SQL.
 */
import { describeAdapter } from '@shardflake/conformance'
import { InProcessSource, instagram } from '@shardflake/core'
import { mikroBlog } from './support/blog'
import { definedBlog, legacyBlog } from './support/entities'
import { mysqlSource, postgresSource } from './support/sources'

const inProcess = () => new InProcessSource({ layout: instagram, shards: 'all' })

describeAdapter('MikroORM 6 / PostgreSQL / in-process / legacy decorators', {
  dialect: 'postgres',
  database: 'sf_mikro6_pg_inproc_legacy',
  postsFollowAuthor: true,
  createSource: inProcess,
  setup: (context) => mikroBlog('postgres', legacyBlog, context),
})

describeAdapter('MikroORM 6 / PostgreSQL / PostgresSource / defineEntity', {
  dialect: 'postgres',
  database: 'sf_mikro6_pg_db_define',
  postsFollowAuthor: true,
  logicalShards: 16,
  createSource: (raw) => postgresSource(raw, 16),
  setup: (context) => mikroBlog('postgres', definedBlog, context),
})

describeAdapter('MikroORM 6 / MariaDB / in-process / defineEntity', {
  dialect: 'mysql',
  database: 'sf_mikro6_my_inproc_define',
  postsFollowAuthor: true,
  createSource: inProcess,
  setup: (context) => mikroBlog('mysql', definedBlog, context),
})

describeAdapter('MikroORM 6 / MariaDB / MysqlSource / legacy decorators', {
  dialect: 'mysql',
  database: 'sf_mikro6_my_db_legacy',
  postsFollowAuthor: true,
  logicalShards: 8,
  createSource: (raw) => mysqlSource(raw, 'sf_mikro6_my_legacy_s', 8),
  setup: (context) => mikroBlog('mysql', legacyBlog, context),
})
