export {
  type AdapterSetupContext,
  type AdapterSuiteOptions,
  describeAdapter,
} from './adapter-suite/describe-adapter'
export { type BlogThroughOrm, blogSchemaSql, type OrmId } from './blog'
export {
  type Dialect,
  freshDatabase,
  mysqlUrl,
  postgresUrl,
  type RawDatabase,
} from './databases'
export {
  anyValue,
  constructAndClose,
  eachOptionReplaced,
  mangledOptions,
  outcomeOf,
  unprintableValues,
  watchUnhandled,
} from './fuzz'
export {
  connectHomeServers,
  type HomeServer,
  type HomeServers,
  type MisplacedRow,
  shardBits,
  startHomeServers,
} from './homes/home-servers'
export {
  type DirectoryUnderTest,
  describeShardHomes,
  type ShardHomesSuiteOptions,
} from './homes/homes-suite'
export { describeRowMoves, type RowMovesSuiteOptions } from './homes/row-move-suite'
export { describeLeaseRegistry, type LeaseRegistrySuiteOptions } from './lease-registry-suite'
export {
  describePlainIdAdapter,
  type PlainBlogThroughOrm,
  type PlainIdSuiteOptions,
} from './plain-id-suite'
export { describeRoutedAdapter } from './routed-suite/describe-routed'
export type {
  RoutedBlogThroughOrm,
  RoutedSetupContext,
  RoutedSuiteOptions,
} from './routed-suite/routed-blog'
export {
  inProcessCase,
  type MysqlPackage,
  type MysqlPoolLike,
  type PostgresPackage,
  type RedisPackage,
  type RoutedSourceCase,
  type RoutedSourceContext,
  routedSources,
  type ShardDrawn,
  type SourcePackages,
} from './routed-suite/routed-sources'
export { expectedShard, findError, ROUTING_KEYS } from './routing'
export { runTag } from './run-tag'
export { freePort } from './servers/free-port'
export { startMariadb } from './servers/mariadb'
export { startPostgres } from './servers/postgres'
export { startRedis } from './servers/redis'
export { redisCommand } from './servers/redis-command'
export type {
  DatabaseServerOptions,
  RestartMode,
  ServerOptions,
  ThrowawayServer,
} from './servers/throwaway-server'
export { testLeasedSharding, testSharding } from './shardings'
export { type WatchedSockets, watchSockets } from './sockets'
export { describeIdSource, type IdSourceSuiteOptions } from './source-suite'
export { asAsync, CountingSource, withClose } from './source-wrappers'
