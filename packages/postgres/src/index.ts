export type { PrefetchOptions } from '@shardflake/core'
export type { SqlClient } from './client'
export type { PostgresDatabase } from './connections'
export { type PostgresFailure, SQLSTATE, translatePostgresError } from './errors'
export {
  type InstallPostgresOptions,
  type InstallPostgresResult,
  type InstallProgress,
  installPostgres,
  readInstalledSharding,
  readInstalledShards,
  setDefault,
} from './installer'
export { PostgresLeaseRegistry, type PostgresLeaseRegistryOptions } from './lease-registry'
export {
  type MovedShard,
  type MovePostgresOptions,
  type MovePostgresResult,
  type MoveProgress,
  movePostgresShards,
} from './move'
export {
  checkIdentifier,
  defaultClause,
  quoteIdentifier,
  setDefaultSql,
  shardSchemaName,
} from './names'
export { type PostgresRowStoreOptions, postgresRowStore } from './row-store'
export {
  PostgresShardDirectory,
  type PostgresShardDirectoryOptions,
} from './shard-directory'
export { PostgresSource, type PostgresSourceOptions } from './source'
export {
  commonSql,
  fenceSql,
  type PostgresSchemaOptions,
  type PostgresSqlOptions,
  postgresSql,
  SQL_VERSION,
  shardSql,
} from './sql'
