import { ConfigurationError, InvalidArgumentError, LayoutMismatchError } from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { asDriverError, translateRoutineError } from './errors'
import {
  counterLimit,
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
 * idempotent, counters are never reset, and a shard that already has a **different layout**, or
 * that moved away from this server, makes the whole call fail before anything is changed.
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
 * @throws ConfigurationError when a shard moved away from this server (`moveMysqlShards`):
 *   installing it again would issue IDs its new home issues too. Move it back instead.
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
    const limit = counterLimit(o.layout)
    for (const shard of shards) {
      const database = shardDatabase(o.schemaPrefix, shard)
      const state = await readShardState(connection, database)
      const installed = state?.layoutKey
      if (installed === undefined) continue
      if (installed !== key) {
        throw new LayoutMismatchError(
          `Shard ${shard} (database ${database}) was installed with layout ${installed}; refusing to install ${key}. Use the layout the IDs were made with.`,
        )
      }
      if (state?.movedTo !== undefined || (state?.counter ?? 0n) > limit) {
        throw new ConfigurationError(
          `Logical shard ${shard} (database ${database}) moved from this server to another one${state?.movedTo === undefined ? '' : ` (${state.movedTo}${state.movedAt === undefined ? '' : `, ${state.movedAt}`})`}: installing it here again would issue IDs its new home issues too. Nothing was changed. To bring it back, move it back (moveMysqlShards).`,
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

/** What a shard database holds, as far as installing and moving it care. @internal */
export interface ShardState {
  layoutKey: string | undefined
  /** Where the shard moved to (`sf_meta.moved_to`), when it moved away from this server. */
  movedTo: string | undefined
  movedAt: string | undefined
  /** `sf_meta.moved_fence`: the counter's last value when it was fenced. */
  movedFence: bigint | undefined
  /** `sf_meta.move_id`: the move that fenced the shard here. */
  moveId: string | undefined
  /** `sf_meta.arrived_by`: the move that brought the shard here. */
  arrivedBy: string | undefined
  /** The counter row's raw value; undefined without one. */
  counter: bigint | undefined
}

/**
 * The metadata and counter of a shard database in one round trip, or undefined when it has no
 * `sf_meta` (not installed). @internal
 */
export async function readShardState(
  connection: Pick<Pool, 'query'>,
  database: string,
): Promise<ShardState | undefined> {
  const db = `\`${database}\``
  const meta = ['layout_key', 'moved_to', 'moved_at', 'moved_fence', 'move_id', 'arrived_by']
    .map(
      (name) => `(SELECT \`value\` FROM ${db}.\`sf_meta\` WHERE \`name\` = '${name}') AS ${name}`,
    )
    .join(', ')
  let found: Record<string, unknown>
  try {
    const [rows] = await connection.query(
      `SELECT ${meta}, (SELECT CAST(\`v\` AS CHAR) FROM ${db}.\`sf_counter\` WHERE \`k\` = 1) AS counter`,
    )
    found = (rows as Record<string, unknown>[])[0] ?? {}
  } catch (error) {
    const code = asDriverError(error)?.code
    if (code === 'ER_BAD_DB_ERROR') return undefined
    if (code !== 'ER_NO_SUCH_TABLE') throw error
    // No counter table (a half-done install), or no metadata at all.
    try {
      const [rows] = await connection.query(`SELECT ${meta}`)
      found = (rows as Record<string, unknown>[])[0] ?? {}
    } catch (inner) {
      if (asDriverError(inner)?.code === 'ER_NO_SUCH_TABLE') return undefined
      throw inner
    }
  }
  const value = (name: string): string | undefined => {
    const v = found[name]
    return typeof v === 'string' ? v : undefined
  }
  const big = (name: string): bigint | undefined => {
    const v = value(name)
    return v !== undefined && /^\d+$/.test(v) ? BigInt(v) : undefined
  }
  return {
    layoutKey: value('layout_key'),
    movedTo: value('moved_to'),
    movedAt: value('moved_at'),
    movedFence: big('moved_fence'),
    moveId: value('move_id'),
    arrivedBy: value('arrived_by'),
    counter: big('counter'),
  }
}
