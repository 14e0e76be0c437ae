export type { PrefetchOptions } from '@shardflake/core'
export type { SqlClient } from './client'
export { type PostgresFailure, SQLSTATE, translatePostgresError } from './errors'
export { checkIdentifier, quoteIdent } from './identifiers'
export {
  type InstallOptions,
  type InstallProgress,
  type InstallResult,
  installPostgres,
  readInstalledSharding,
  readInstalledShards,
  setDefault,
} from './installer'
export { PostgresLeaseRegistry, type PostgresLeaseRegistryOptions } from './lease-registry'
export {
  type MovedShard,
  type MoveOptions,
  type MoveProgress,
  type MoveResult,
  movePostgresShards,
} from './move'
export { type PostgresDatabase, PostgresSource, type PostgresSourceOptions } from './source'
export {
  commonSql,
  defaultClause,
  fenceSql,
  type PostgresSchemaOptions,
  type PostgresSqlOptions,
  postgresSql,
  resolveSqlOptions,
  SQL_VERSION,
  setDefaultSql,
  shardSchemaName,
  shardSql,
} from './sql'
