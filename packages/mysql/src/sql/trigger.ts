import { type Ddl, toDdl } from '@shardflake/core'
import { checkIdentifier, quoteIdentifier, shardSchemaName } from '../identifiers'
import { checkSqlOptions, type MysqlSqlOptions, resolveSqlOptions } from './options'
import { STRICT_MODE_BEGIN, STRICT_MODE_END } from './shard-parts'

/** What {@link mysqlTriggerSql} takes. */
export interface MysqlTriggerOptions extends MysqlSqlOptions {
  /** The database of the table. */
  database: string
  /** The table whose rows get IDs. */
  table: string
  /** The logical shard whose `next_id()` fills the column. */
  shard: number
  /** @default 'id' */
  column?: string
}

/**
 * A BEFORE INSERT trigger that fills a NULL or 0 id with `shard_<n>.next_id()`, so plain SQL
 * inserts get IDs (MySQL cannot call a function in a column DEFAULT). Declare the column
 * `BIGINT NOT NULL DEFAULT 0` so rows may omit it: a row never keeps 0 or NULL as its ID,
 * whatever the session's `sql_mode`. The trigger runs inside the INSERT, so with an InnoDB
 * counter its row lock lasts until that transaction commits.
 *
 * @example
 * ```ts
 * import { defineSharding, instagram } from '@shardflake/core'
 * import { mysqlTriggerSql } from '@shardflake/mysql'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
 * const ddl = mysqlTriggerSql({ sharding, database: 'app', table: 'posts', shard: 5 })
 * ddl.statements // for a driver; ddl.script for the mariadb client
 * ```
 */
export function mysqlTriggerSql(options: MysqlTriggerOptions): Ddl {
  checkSqlOptions('mysqlTriggerSql', options, ['database', 'table', 'shard', 'column'])
  const o = resolveSqlOptions(options, 'mysqlTriggerSql')
  o.sharding.checkShard(options.shard)
  const database = quoteIdentifier('database', options.database)
  const table = quoteIdentifier('table', options.table)
  const columnName = checkIdentifier('column', options.column ?? 'id')
  const column = `\`${columnName}\``
  const trigger = quoteIdentifier('trigger', `${options.table}_sf_${columnName}`.slice(0, 63))
  const shardDb = quoteIdentifier('database', shardSchemaName(options.shard, o.schemaPrefix))
  const body = `BEFORE INSERT ON ${database}.${table} FOR EACH ROW
BEGIN
  IF NEW.${column} IS NULL OR NEW.${column} = 0 THEN
    SET NEW.${column} = ${shardDb}.\`next_id\`();
  END IF;
END`
  const create =
    o.dialect === 'mariadb'
      ? [`CREATE OR REPLACE TRIGGER ${database}.${trigger}\n${body}`]
      : [
          `DROP TRIGGER IF EXISTS ${database}.${trigger}`,
          `CREATE TRIGGER ${database}.${trigger}\n${body}`,
        ]
  return toDdl([...STRICT_MODE_BEGIN, ...create, ...STRICT_MODE_END], { delimiter: '$$' })
}
