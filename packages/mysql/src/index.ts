export { checkIdentifier, checkSchemaPrefix, quoteIdentifier } from './identifiers'
export {
  detectDialect,
  type InstallMysqlOptions,
  type InstallMysqlResult,
  type InstallProgress,
  installMysqlShards,
} from './installer'
export {
  type MovedShard,
  type MoveMysqlOptions,
  type MoveMysqlResult,
  type MoveProgress,
  moveMysqlShards,
} from './move'
export { MysqlSource, type MysqlSourceOptions } from './mysql-source'
export { BIG_NUMBER_OPTIONS, checkBigNumberConfig, createMysqlPool } from './pool'
export {
  type CounterEngine,
  type GenerateMysqlSqlOptions,
  generateMysqlSql,
  layoutKey,
  MAX_BATCH,
  type MysqlDialect,
  type MysqlSqlOptions,
  type MysqlTriggerOptions,
  mysqlFenceStatements,
  mysqlShardStatements,
  mysqlTriggerSql,
  SQL_VERSION,
  shardDatabase,
} from './sql'
export {
  MAX_TICKET_INCREMENT,
  type TicketEngine,
  type TicketInstallOptions,
  type TicketServer,
  TicketServerSource,
  type TicketServerSourceOptions,
  type TicketSqlOptions,
  ticketServerStatements,
} from './ticket-server-source'
