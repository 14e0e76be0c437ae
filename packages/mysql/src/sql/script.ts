import { type Ddl, readShardList, type ShardList, toDdl } from '@shardflake/core'
import { checkSqlOptions, type MysqlSqlOptions, resolveSqlOptions } from './options'
import { STRICT_MODE_BEGIN, STRICT_MODE_END } from './shard-parts'
import { shardRoutineStatements } from './shard-routines'
import { shardSetupStatements } from './shard-setup'

/** What {@link mysqlSql} takes. */
export interface MysqlSqlScriptOptions extends MysqlSqlOptions {
  /** The logical shards to install: a list, `{ from, to }`, `'all'` or `"0-99,200"`. */
  shards: ShardList
}

/** The statements that install one logical shard (setup, then routines). @internal */
export function shardStatements(o: ReturnType<typeof resolveSqlOptions>, shard: number): string[] {
  return [...shardSetupStatements(o, shard), ...shardRoutineStatements(o, shard)]
}

/**
 * The SQL that installs every shard in `shards`: per shard a database with its metadata
 * (layout and logicalShards), its counter row, `reserve_ids(n)`, `next_id()`, `next_ids(n)`,
 * `generate_id(shard_key, OUT id)` and decode helpers. Re-runnable: counters are kept, another
 * sharding is refused (SQLSTATE `SF002`) before anything is replaced. Pure: nothing is executed;
 * `installMysql` runs the same statements.
 *
 * @example
 * ```ts
 * import { defineSharding, instagram } from '@shardflake/core'
 * import { mysqlSql } from '@shardflake/mysql'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
 * const ddl = mysqlSql({ sharding, shards: '0-3' })
 * // ddl.script: mariadb -uroot < shards.sql; ddl.statements: one by one through a driver
 * ```
 * @throws ShardOutOfRangeError for shards outside the logical shards (checked before expanding).
 */
export function mysqlSql(options: MysqlSqlScriptOptions): Ddl {
  checkSqlOptions('mysqlSql', options, ['shards'])
  const o = resolveSqlOptions(options, 'mysqlSql')
  const shards = readShardList(options.shards, o.sharding)
  return toDdl(
    [
      ...STRICT_MODE_BEGIN,
      ...shards.flatMap((shard) => shardStatements(o, shard)),
      ...STRICT_MODE_END,
    ],
    { delimiter: '$$' },
  )
}
