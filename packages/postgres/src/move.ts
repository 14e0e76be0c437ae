import {
  ConfigurationError,
  InvalidArgumentError,
  readShardList,
  type ShardingDescription,
  type ShardList,
} from '@shardflake/core'
import { openSession, type Session, type SqlClient } from './client'
import { transaction, translate } from './installer'
import { arrive, checkMove, describeDatabase, fence, sameDatabase, step } from './move-steps'
import { commonScript, retirementColumnsScript } from './sql/common'
import { type PostgresSqlOptions, resolveSqlOptions } from './sql/options'

/**
 * What {@link movePostgresShards} takes. The SQL options (`marginMs`, `maxDriftMs`, ...) are those of the
 * shards' installation on the new home, as for `installPostgres`; `worker` and `cache` default to
 * what the old home recorded for each shard.
 */
export interface MoveOptions extends PostgresSqlOptions {
  /** The database the shards live in now (their old home): a `pg.Pool`, a `pg.Client`, a PGlite. */
  from: SqlClient
  /** The database that takes them over (their new home). Installed there when missing. */
  to: SqlClient
  /** The logical shards to move: a list, `{ from, to }` or `"0-99,200"`. */
  shards: ShardList
  /** Called after each shard has arrived (switch that shard in your shard map from here on). */
  onProgress?: (progress: MoveProgress) => void
  /**
   * The longest each step waits for the locks it needs: on the old home, for the transactions
   * that drew IDs of the shard and are still open (draws of the shard queue behind the fence
   * meanwhile); on the new home, likewise. Past it the move stops with `LockTimeoutError`,
   * having changed nothing of that shard; run it again.
   * @default 5000
   */
  lockTimeoutMs?: number
}

/** Progress of {@link movePostgresShards}, reported after each shard. */
export interface MoveProgress {
  /** Shards moved so far. */
  done: number
  total: number
  /** The shard just moved: the old home refuses it, the new home serves it. */
  shard: number
  /** L: the highest sequence value the old home can ever have issued for it. */
  fencedAt: bigint
}

/** One logical shard moved by {@link movePostgresShards} (the same shape as `moveMysqlShards`'). */
export interface MovedShard {
  shard: number
  /**
   * L, where the old home was fenced: the highest sequence value (ID space) it can ever have
   * issued for the shard. The new home continues above it.
   */
  fencedAt: bigint
  /**
   * How far the new home's sequence is ahead of its clock, in ms (0 or less: not ahead). Above
   * `maxDriftMs` (a burst on the old home, or its clock ahead of the new one) the first draws
   * there wait for the clock, at most `maxWaitMs` each, then fail with SF001 until it catches up.
   */
  aheadMs: number
  /** The old home was fenced already (a move run again after it stopped half-way). */
  resumed: boolean
}

/** What {@link movePostgresShards} did. */
export interface MoveResult {
  sharding: ShardingDescription
  /** The common schema. */
  schema: string
  /** The shards moved, ascending. */
  shards: MovedShard[]
}

/**
 * Moves logical shards from one database to another without ever repeating an ID, shard by
 * shard: (1) **fences** the old home (`fenceSql`: its sequence can no longer advance past
 * L, at least its last value, and `next_id()`/`next_ids(n)` there raise SQLSTATE `SF005`; the
 * metadata records the move, and a later `installPostgres` of the shard there is refused), then
 * (2) installs the shard on the new home if needed and moves its sequence to at least L
 * (`_advance_to`, never backwards), in one transaction. IDs drawn on the old home while the
 * fence was set are at most L; every ID the new home issues is above L.
 *
 * Between (1) and your shard map pointing at the new home, IDs of the shard are refused (`SF005`,
 * `ShardMovedError` in {@link PostgresSource}); switch each shard when `onProgress` reports it.
 * The new home must not serve the shard before the move: IDs it issued earlier are not covered.
 *
 * Idempotent and resumable: run it again after a failure half-way, and it recognises a fenced old
 * home (L stays), and never moves a sequence backwards. Moving a shard back to a database it left
 * lifts that database's fence. No data moves: copy the shard's rows yourself.
 *
 * @throws ConfigurationError when `from` and `to` are the same database, a shard is not installed
 *   on `from` (or under another schema name on `to`), or `from` holds no installation.
 * @throws ShardingMismatchError when `from` or `to` records another layout or `logicalShards`.
 * @throws ShardMovedError when a shard already moved from `from` to another database, or `to` has
 *   moved it on since (a stale re-run).
 * @throws InvalidIdentifierError for a schema or prefix that is not a plain identifier.
 * @throws LockTimeoutError when a lock was not granted within `lockTimeoutMs`.
 * @example
 * ```ts
 * import pg from 'pg'
 * import { defineSharding, instagram } from '@shardflake/core'
 * import { movePostgresShards } from '@shardflake/postgres'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
 * const result = await movePostgresShards({
 *   from: new pg.Pool({ connectionString: process.env.SERVER_A }),
 *   to: new pg.Pool({ connectionString: process.env.SERVER_B }),
 *   sharding,
 *   shards: '1000-1099',
 *   onProgress: ({ shard }) => routing.set(shard, 'B'), // your routing; rebuild the ShardMap from it
 * })
 * ```
 */
export async function movePostgresShards(options: MoveOptions): Promise<MoveResult> {
  const resolved = resolveSqlOptions(options)
  const shards = readShardList(options.shards, resolved.sharding)
  const lockTimeoutMs = options.lockTimeoutMs ?? 5000
  if (!Number.isSafeInteger(lockTimeoutMs) || lockTimeoutMs < 1 || lockTimeoutMs > 3_600_000) {
    throw new InvalidArgumentError(
      `lockTimeoutMs must be an integer from 1 to 3600000, got ${String(lockTimeoutMs)}.`,
    )
  }
  if (options.from === options.to) {
    throw new ConfigurationError(
      'from and to are the same database: a logical shard moves from one database to another.',
    )
  }
  const sessions: Session[] = []
  try {
    const from = await openSession(options.from)
    sessions.push(from)
    const to = await openSession(options.to)
    sessions.push(to)
    if (await sameDatabase(from, to)) {
      throw new ConfigurationError(
        'from and to are the same database (two connections to it): a logical shard moves from one database to another.',
      )
    }
    const destination = await describeDatabase(to)
    const recorded = await checkMove(from, to, resolved, shards, destination)
    // The new home gets the common objects (and the layout, checked); the old one the columns
    // that record a move.
    await transaction(to, resolved, commonScript(resolved))
    await transaction(from, resolved, retirementColumnsScript(resolved))
    const moved: MovedShard[] = []
    for (const shard of shards) {
      const own = recorded.get(shard)!
      // The new home keeps the old home's worker and cache unless told otherwise.
      const o = resolveSqlOptions({
        ...options,
        worker: options.worker ?? own.worker,
        cache: options.cache ?? own.cache,
      })
      const fenced = await step('old', shard, lockTimeoutMs, () =>
        fence(from, o, shard, destination, lockTimeoutMs),
      )
      const arrived = await step('new', shard, lockTimeoutMs, () =>
        arrive(to, o, shard, fenced.fence, lockTimeoutMs),
      )
      moved.push({
        shard,
        fencedAt: fenced.fence,
        aheadMs: arrived.aheadMs,
        resumed: fenced.resumed,
      })
      options.onProgress?.({
        done: moved.length,
        total: shards.length,
        shard,
        fencedAt: fenced.fence,
      })
    }
    for (const session of sessions) session.release()
    return { sharding: resolved.sharding.toJSON(), schema: resolved.schema, shards: moved }
  } catch (error) {
    for (const session of sessions) session.release(error instanceof Error ? error : undefined)
    throw translate(error, 'movePostgresShards')
  }
}
