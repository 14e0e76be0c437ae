import type { LayoutDescription, ShardingDescription } from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { driverError } from './errors'
import type { MysqlDialect } from './sql/options'

/** `'mariadb'` when the server says MariaDB, else `'mysql8'`. */
export async function detectDialect(pool: Pick<Pool, 'query'>): Promise<MysqlDialect> {
  const [rows] = await pool.query('SELECT VERSION() AS version')
  const version = String((rows as { version?: unknown }[])[0]?.version ?? '')
  return /mariadb/i.test(version) ? 'mariadb' : 'mysql8'
}

/** What a shard database holds, as far as installing and moving it care. @internal */
export interface ShardState {
  layoutKey: string | undefined
  /** The recorded layout and logicalShards; undefined when either is missing. */
  sharding: ShardingDescription | undefined
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

const META = [
  'layout_key',
  'layout',
  'logical_shards',
  'moved_to',
  'moved_at',
  'moved_fence',
  'move_id',
  'arrived_by',
]

/**
 * The metadata and counter of a shard database in one round trip, or undefined when it has no
 * `sf_meta` (not installed). @internal
 */
export async function readShardState(
  connection: Pick<Pool, 'query'>,
  database: string,
): Promise<ShardState | undefined> {
  const db = `\`${database}\``
  const meta = META.map(
    (name) => `(SELECT \`value\` FROM ${db}.\`sf_meta\` WHERE \`name\` = '${name}') AS ${name}`,
  ).join(', ')
  let found: Record<string, unknown>
  try {
    const [rows] = await connection.query(
      `SELECT ${meta}, (SELECT CAST(\`v\` AS CHAR) FROM ${db}.\`sf_counter\` WHERE \`k\` = 1) AS counter`,
    )
    found = (rows as Record<string, unknown>[])[0] ?? {}
  } catch (error) {
    const errno = driverError(error)?.errno
    if (errno === 1049) return undefined // ER_BAD_DB_ERROR
    if (errno !== 1146) throw error // ER_NO_SUCH_TABLE
    // No counter table (a half-done install), or no metadata at all.
    try {
      const [rows] = await connection.query(`SELECT ${meta}`)
      found = (rows as Record<string, unknown>[])[0] ?? {}
    } catch (inner) {
      if (driverError(inner)?.errno === 1146) return undefined
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
    sharding: recordedSharding(value('layout'), value('logical_shards')),
    movedTo: value('moved_to'),
    movedAt: value('moved_at'),
    movedFence: big('moved_fence'),
    moveId: value('move_id'),
    arrivedBy: value('arrived_by'),
    counter: big('counter'),
  }
}

/** The sharding recorded in `sf_meta` (`layout` JSON and `logical_shards`). @internal */
export function recordedSharding(
  layout: unknown,
  logicalShards: unknown,
): ShardingDescription | undefined {
  if (typeof layout !== 'string' || typeof logicalShards !== 'string') return undefined
  try {
    return {
      layout: JSON.parse(layout) as LayoutDescription,
      logicalShards: Number(logicalShards),
    }
  } catch {
    return undefined
  }
}
