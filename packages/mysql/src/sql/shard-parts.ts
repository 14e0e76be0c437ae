import { MAX_IDS_PER_CALL } from '@shardflake/core'
import { quoteIdentifier, shardSchemaName } from '../identifiers'
import { counterLimit, type ResolvedSqlOptions } from './options'

/** Largest `n` one `next_ids(n)` / `reserve_ids(n)` call may ask for (core's MAX_IDS_PER_CALL). */
export const MAX_BATCH = MAX_IDS_PER_CALL

/** Version of the routines' contract, stored in `sf_meta`. */
export const SQL_VERSION = '4'

/**
 * The `sql_mode` the routines and triggers are created with. MySQL and MariaDB run a routine
 * with the mode it was created under, so a NULL or a non-numeric argument is an error inside
 * them (never a silent 0), whatever the caller's session uses.
 */
export const ROUTINE_SQL_MODE =
  'STRICT_ALL_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'

/** Saves the session's sql_mode and switches to {@link ROUTINE_SQL_MODE}. @internal */
export const STRICT_MODE_BEGIN = [
  'SET @shardflake_saved_sql_mode = @@SESSION.sql_mode',
  `SET SESSION sql_mode = '${ROUTINE_SQL_MODE}'`,
]

/** Restores the session's sql_mode. @internal */
export const STRICT_MODE_END = [
  'SET SESSION sql_mode = COALESCE(@shardflake_saved_sql_mode, @@GLOBAL.sql_mode)',
]

/** The names and SQL pieces every statement of one shard uses. @internal */
export interface ShardParts {
  /** The quoted database of the shard. */
  db: string
  /** sequenceBits. */
  S: number
  /** The end of the counter: the first value past the layout's time field. */
  limitV: bigint
  /** `CREATE [OR REPLACE] kind head\nbody`, as one or two statements (MySQL 8 drops first). */
  routine(kind: 'FUNCTION' | 'PROCEDURE', head: string, body: string): string[]
}

/** @internal */
export function shardParts(o: ResolvedSqlOptions, shard: number): ShardParts {
  const db = quoteIdentifier('database', shardSchemaName(shard, o.schemaPrefix))
  const routine = (kind: 'FUNCTION' | 'PROCEDURE', head: string, body: string): string[] =>
    o.dialect === 'mariadb'
      ? [`CREATE OR REPLACE ${kind} ${db}.${head}\n${body}`]
      : [
          `DROP ${kind} IF EXISTS ${db}.${head.replace(/\(.*$/s, '')}`,
          `CREATE ${kind} ${db}.${head}\n${body}`,
        ]
  return { db, S: o.layout.sequenceBits, limitV: counterLimit(o.layout), routine }
}
