import {
  describeValue,
  InvalidArgumentError,
  readShardList,
  type ShardingDescription,
  type ShardList,
  ShardMovedError,
} from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { connectFailure, translateError } from './errors'
import { shardSchemaName } from './identifiers'
import { checkPool } from './pool'
import { detectDialect, readShardState } from './shard-state'
import {
  checkSqlOptions,
  counterLimit,
  type MysqlDialect,
  type MysqlSqlOptions,
  resolveSqlOptions,
} from './sql/options'
import { shardStatements } from './sql/script'
import { STRICT_MODE_BEGIN, STRICT_MODE_END } from './sql/shard-parts'

/** What {@link installMysql} takes. */
export interface InstallMysqlOptions extends Omit<MysqlSqlOptions, 'dialect'> {
  /** The logical shards this server holds: a list, `{ from, to }`, `'all'` or `"0-99,200"`. */
  shards: ShardList
  /**
   * The server's dialect; `'auto'` asks the server (`VERSION()` contains `MariaDB`).
   * @default 'auto'
   */
  dialect?: MysqlDialect | 'auto'
  /** Called after each shard (for a progress bar). */
  onProgress?: (progress: InstallProgress) => void
}

/** Reported after each installed shard. */
export interface InstallProgress {
  shard: number
  database: string
  done: number
  total: number
  /** False when the shard existed already (its routines were replaced, its counter kept). */
  created: boolean
}

/** What {@link installMysql} did: the same shape as `installPostgres`'s. */
export interface InstallMysqlResult {
  /** The sharding recorded with every shard. */
  sharding: ShardingDescription
  /** The shards installed or updated, ascending. */
  shards: number[]
  /** Shards installed for the first time. */
  created: number[]
  /** Shards that existed with the same sharding (routines replaced, counters kept). */
  updated: number[]
  dialect: 'mysql'
  /** The server's flavour: MariaDB or MySQL 8. */
  flavor: MysqlDialect
}

/**
 * Installs (or re-installs) `shards` on one server, one after the other: per shard a database
 * with its metadata (the layout and logicalShards), its counter and its routines. Idempotent:
 * counters are never reset. Everything is checked before anything is created: the layout can
 * still make IDs (`layout.checkGenerating()`), the shard list and names are valid, and no shard
 * of the list holds another sharding or moved away from this server.
 *
 * @example
 * ```ts
 * import { defineSharding, instagram } from '@shardflake/core'
 * import { createMysqlPool, installMysql } from '@shardflake/mysql'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
 * const pool = await createMysqlPool('mysql://root@127.0.0.1:3306/test')
 * await installMysql(pool, { sharding, shards: '0-999' })
 * ```
 * @throws ConfigurationError without a sharding (it names `logicalShards`).
 * @throws TimeExhaustedError, InvalidLayoutError for a layout that cannot make IDs now.
 * @throws ShardOutOfRangeError, InvalidArgumentError, InvalidIdentifierError for bad input.
 * @throws ShardingMismatchError when a shard was installed with another layout or logicalShards.
 * @throws ShardMovedError when a shard moved away from this server (move it back instead).
 */
export async function installMysql(
  pool: Pool,
  options: InstallMysqlOptions,
): Promise<InstallMysqlResult> {
  // Everything the caller gave is checked before the server is asked anything.
  checkPool('installMysql', pool)
  checkSqlOptions('installMysql', options, ['shards', 'onProgress'])
  checkCallback('onProgress', options.onProgress)
  const base = resolveSqlOptions({ ...options, dialect: 'mariadb' }, 'installMysql')
  const shards = readShardList(options.shards, base.sharding)
  shardSchemaName(shards[shards.length - 1]!, base.schemaPrefix)
  const dialect =
    options.dialect === undefined || options.dialect === 'auto'
      ? await detectDialect(pool).catch((error: unknown) => {
          // SELECT VERSION() fails only while connecting.
          throw translateError(error, { what: 'the installation', connecting: true })
        })
      : options.dialect
  const o = resolveSqlOptions({ ...options, dialect }, 'installMysql')
  const { sharding } = o
  let connection: Awaited<ReturnType<Pool['getConnection']>>
  try {
    connection = await pool.getConnection()
  } catch (error) {
    throw translateError(connectFailure(error), { what: 'the installation' })
  }
  let failed = false
  try {
    const existing = new Set<number>()
    const limit = counterLimit(o.layout)
    for (const shard of shards) {
      const database = shardSchemaName(shard, o.schemaPrefix)
      const what = `logical shard ${shard} (database ${database})`
      const state = await readShardState(connection, database).catch((error: unknown) => {
        throw translateError(error, { what, shard })
      })
      if (state?.layoutKey === undefined) continue
      if (state.sharding) sharding.checkSame(state.sharding, `database ${database}`)
      if (state.movedTo !== undefined || (state.counter ?? 0n) > limit) {
        throw new ShardMovedError(
          shard,
          `Logical shard ${shard} (database ${database}) moved from this server to another one${state.movedTo === undefined ? '' : ` (${state.movedTo}${state.movedAt === undefined ? '' : `, ${state.movedAt}`})`}: installing it here again would issue IDs its new home issues too. Nothing was changed. To bring it back, move it back (moveMysqlShards).`,
        )
      }
      existing.add(shard)
    }
    const result: InstallMysqlResult = {
      sharding: sharding.toJSON(),
      shards,
      created: [],
      updated: [],
      dialect: 'mysql',
      flavor: dialect,
    }
    let done = 0
    for (const shard of shards) {
      const database = shardSchemaName(shard, o.schemaPrefix)
      try {
        for (const statement of [
          ...STRICT_MODE_BEGIN,
          ...shardStatements(o, shard),
          ...STRICT_MODE_END,
        ]) {
          await connection.query(statement)
        }
      } catch (error) {
        failed = true
        throw translateError(error, {
          what: `logical shard ${shard} (database ${database})`,
          shard,
        })
      }
      const created = !existing.has(shard)
      ;(created ? result.created : result.updated).push(shard)
      done++
      options.onProgress?.({ shard, database, done, total: shards.length, created })
    }
    return result
  } finally {
    // A statement that failed half-way may have left the session's sql_mode strict.
    if (failed) connection.destroy()
    else connection.release()
  }
}

/**
 * Throws unless `callback` is undefined or a function. @internal
 * @throws InvalidArgumentError
 */
export function checkCallback(name: string, callback: unknown): void {
  if (callback !== undefined && typeof callback !== 'function') {
    throw new InvalidArgumentError(`${name} must be a function, got ${describeValue(callback)}.`)
  }
}
