export type { PrefetchOptions } from '@shardflake/core'
export type { SqlClient } from './client'
export { checkIdentifier, quoteIdent } from './identifiers'
export {
  type InstallOptions,
  type InstallProgress,
  type InstallResult,
  installPostgres,
  readInstalledLayout,
  readInstalledShards,
  setDefault,
} from './installer'
export {
  type MovedShard,
  type MoveOptions,
  type MoveProgress,
  type MoveResult,
  moveShards,
} from './move'
export { PostgresSource, type PostgresSourceOptions } from './source'
export {
  commonSql,
  defaultClause,
  fenceSql,
  type PostgresLayoutOptions,
  type PostgresSqlOptions,
  postgresSql,
  resolveSqlOptions,
  SQL_VERSION,
  setDefaultSql,
  shardSchemaName,
  shardSql,
} from './sql'
