export { commonSql } from './common'
export { fenceSql } from './fence'
export {
  type PostgresSchemaOptions,
  type PostgresSqlOptions,
  SQL_VERSION,
} from './options'
export { postgresSql } from './script'
export { shardSql } from './shard'
