/**
 * The adapter conformance suite on MikroORM 6.6: {PostgreSQL, MariaDB} x {in-process, the same
 * behind promises, PostgresSource, MysqlSource} x {legacy decorators from @mikro-orm/core, defineEntity},
 * checked through raw SQL (co-location decoded from both IDs).
 */
import { asAsync, describeAdapter, testSharding } from '@shardflake/conformance'
import { InProcessSource, type Sharding } from '@shardflake/core'
import { mikroBlog } from './support/blog'
import { definedBlog, legacyBlog } from './support/entities'
import { mysqlSource, postgresSource } from './support/sources'

const inProcess = (_raw: unknown, sharding: Sharding) =>
  new InProcessSource({ sharding, shards: 'all' })

describeAdapter('MikroORM 6 / PostgreSQL / in-process / legacy decorators', {
  dialect: 'postgres',
  database: 'sf_mikro6_pg_inproc_legacy',
  createSource: inProcess,
  setup: (context) => mikroBlog('postgres', legacyBlog, context),
})

describeAdapter('MikroORM 6 / PostgreSQL / PostgresSource / defineEntity', {
  dialect: 'postgres',
  database: 'sf_mikro6_pg_db_define',
  createSource: postgresSource,
  setup: (context) => mikroBlog('postgres', definedBlog, context),
})

describeAdapter('MikroORM 6 / MariaDB / in-process / defineEntity', {
  dialect: 'mysql',
  database: 'sf_mikro6_my_inproc_define',
  createSource: inProcess,
  setup: (context) => mikroBlog('mysql', definedBlog, context),
})

describeAdapter('MikroORM 6 / MariaDB / in-process behind promises / legacy decorators', {
  dialect: 'mysql',
  database: 'sf_mikro6_my_async_legacy',
  createSource: (raw, sharding) => asAsync(inProcess(raw, sharding)),
  setup: (context) => mikroBlog('mysql', legacyBlog, context),
})

describeAdapter('MikroORM 6 / MariaDB / MysqlSource / defineEntity', {
  dialect: 'mysql',
  database: 'sf_mikro6_my_db_define',
  sharding: testSharding(8), // one database per logical shard
  createSource: mysqlSource,
  setup: (context) => mikroBlog('mysql', definedBlog, context),
})
