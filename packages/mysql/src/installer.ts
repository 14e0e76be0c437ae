import { InvalidArgumentError, LayoutMismatchError } from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { asDriverError, translateRoutineError } from './errors'
import {
  layoutKey,
  type MysqlDialect,
  type MysqlSqlOptions,
  resolveSqlOptions,
  shardDatabase,
  shardStatements,
} from './sql'

/** What {@link installMysqlShards} takes. */
export interface InstallMysqlOptions extends Omit<MysqlSqlOptions, 'dialect'> {
  /** The logical shards to install on this server (from `parseShardList`). */
  shards: readonly number[]
  /**
   * The server's dialect; `'auto'` asks the server (`VERSION()` contains `MariaDB`).
   * @default 'auto'
   */
  dialect?: MysqlDialect | 'auto'
  /** Called after each shard with the number of shards done so far. */
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

/** What {@link installMysqlShards} did. */
export interface InstallMysqlResult {
  dialect: MysqlDialect
  /** Shards installed for the first time. */
  created: number[]
  /** Shards that existed with the same layout (routines replaced, counters kept). */
  updated: number[]
}

/**
 * Installs (or re-installs) the routines of `shards` on one server, one shard after the other:
 * idempotent, counters are never reset, and a shard that already has a **different layout** makes
 * the whole call fail with `LayoutMismatchError` before anything is changed.
 *
 * @example
 * ```ts
 * import { instagram, parseShardList } from '@shardflake/core'
 * import { createMysqlPool, installMysqlShards } from '@shardflake/mysql'
 *
 * const pool = await createMysqlPool('mysql://root@127.0.0.1:3306/test')
 * await installMysqlShards(pool, {
 *   layout: instagram,
 *   shards: parseShardList('0-999'),
 *   onProgress: ({ done, total }) => console.log(`${done}/${total}`),
 * })
 * ```
 * @throws LayoutMismatchError when a shard was installed with another layout.
 */
export async function installMysqlShards(
  pool: Pool,
  options: InstallMysqlOptions,
): Promise<InstallMysqlResult> {
  const { shards } = options
  if (shards.length === 0) throw new InvalidArgumentError('shards must not be empty.')
  const dialect =
    options.dialect === undefined || options.dialect === 'auto'
      ? await detectDialect(pool)
      : options.dialect
  const o = resolveSqlOptions({ ...options, dialect })
  for (const shard of shards) o.layout.checkShard(shard)
  const key = layoutKey(o.layout)
  const connection = await pool.getConnection()
  try {
    const existing = new Map<number, string>()
    for (const shard of shards) {
      const installed = await installedLayoutKey(connection, shardDatabase(o.schemaPrefix, shard))
      if (installed === undefined) continue
      if (installed !== key) {
        throw new LayoutMismatchError(
          `Shard ${shard} (database ${shardDatabase(o.schemaPrefix, shard)}) was installed with layout ${installed}; refusing to install ${key}. Use the layout the IDs were made with.`,
        )
      }
      existing.set(shard, installed)
    }
    const result: InstallMysqlResult = { dialect, created: [], updated: [] }
    let done = 0
    for (const shard of shards) {
      for (const statement of shardStatements(o, shard)) {
        try {
          await connection.query(statement)
        } catch (error) {
          throw translateRoutineError(error, shard, 0)
        }
      }
      const created = !existing.has(shard)
      ;(created ? result.created : result.updated).push(shard)
      done++
      options.onProgress?.({
        shard,
        database: shardDatabase(o.schemaPrefix, shard),
        done,
        total: shards.length,
        created,
      })
    }
    return result
  } finally {
    connection.release()
  }
}

/** `'mariadb'` when the server says MariaDB, else `'mysql8'`. */
export async function detectDialect(pool: Pick<Pool, 'query'>): Promise<MysqlDialect> {
  const [rows] = await pool.query('SELECT VERSION() AS version')
  const version = String((rows as { version?: unknown }[])[0]?.version ?? '')
  return /mariadb/i.test(version) ? 'mariadb' : 'mysql8'
}

/** The layout key stored in a shard database, or undefined when it is not installed. @internal */
export async function installedLayoutKey(
  connection: Pick<Pool, 'query'>,
  database: string,
): Promise<string | undefined> {
  try {
    const [rows] = await connection.query(
      `SELECT \`value\` FROM \`${database}\`.\`sf_meta\` WHERE \`name\` = 'layout_key'`,
    )
    const value = (rows as { value?: unknown }[])[0]?.value
    return typeof value === 'string' ? value : undefined
  } catch (error) {
    const code = asDriverError(error)?.code
    if (code === 'ER_BAD_DB_ERROR' || code === 'ER_NO_SUCH_TABLE') return undefined
    throw error
  }
}
