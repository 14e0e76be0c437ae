export type { MysqlDatabases, MysqlTarget } from './databases'
export { checkIdentifier, checkSchemaPrefix, quoteIdentifier, shardSchemaName } from './identifiers'
export {
  type InstallMysqlOptions,
  type InstallMysqlResult,
  type InstallProgress,
  installMysql,
} from './installer'
export { MysqlLeaseRegistry, type MysqlLeaseRegistryOptions } from './lease-registry'
export {
  type MovedShard,
  type MoveMysqlOptions,
  type MoveMysqlResult,
  type MoveProgress,
  moveMysqlShards,
} from './move'
export { MysqlSource, type MysqlSourceOptions } from './mysql-source'
export { BIG_NUMBER_OPTIONS, checkBigNumberConfig, createMysqlPool } from './pool'
export { type MysqlRowStoreOptions, mysqlRowStore } from './row-store'
export { MysqlShardDirectory, type MysqlShardDirectoryOptions } from './shard-directory'
export { detectDialect } from './shard-state'
export {
  type CounterEngine,
  layoutKey,
  type MysqlDialect,
  type MysqlSqlOptions,
} from './sql/options'
export { type MysqlSqlScriptOptions, mysqlSql } from './sql/script'
export { MAX_BATCH, ROUTINE_SQL_MODE, SQL_VERSION } from './sql/shard-parts'
export { SIGNALS } from './sql/signals'
export { type MysqlTriggerOptions, mysqlTriggerSql } from './sql/trigger'
export {
  MAX_TICKET_INCREMENT,
  type TicketServer,
  type TicketServersOptions,
} from './tickets/config'
export { type InstallTicketServersOptions, installTicketServers } from './tickets/install'
export { TicketServerSource, type TicketServerSourceOptions } from './tickets/source'
export { type TicketEngine, type TicketSqlOptions, ticketServerSql } from './tickets/sql'
