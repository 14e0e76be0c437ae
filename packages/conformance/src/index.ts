export {
  type AdapterSetupContext,
  type AdapterSuiteOptions,
  asAsync,
  type BlogThroughOrm,
  blogSchemaSql,
  CountingSource,
  describeAdapter,
  type OrmId,
  testLeasedSharding,
  testSharding,
} from './adapter-suite'
export {
  type Dialect,
  freshDatabase,
  mysqlUrl,
  postgresUrl,
  type RawDatabase,
} from './databases'
export {
  describePlainIdAdapter,
  type PlainBlogThroughOrm,
  type PlainIdSuiteOptions,
} from './plain-id-suite'
export { expectedShard, findError, ROUTING_KEYS } from './routing'
export { runTag } from './run-tag'
export {
  type DatabaseServerOptions,
  freePort,
  type RestartMode,
  redisCommand,
  type ServerOptions,
  startMariadb,
  startPostgres,
  startRedis,
  type ThrowawayServer,
} from './servers'
export { describeIdSource, type IdSourceSuiteOptions } from './source-suite'
