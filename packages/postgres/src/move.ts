import {
  ConfigurationError,
  checkMoveEnds,
  type MovedShard,
  type MoveProgress,
  moveShards,
  readShardList,
  type ShardingDescription,
  type ShardList,
} from '@shardflake/core'
import { checkClient, openSession, type Session, type SqlClient } from './client'
import { checkCallback, transaction, translate } from './installer'
import { arrive, checkMove, describeDatabase, fence, sameDatabase, step } from './move-steps'
import { commonScript, retirementColumnsScript } from './sql/common'
import { type PostgresSqlOptions, resolveSqlOptions } from './sql/options'

export type { MovedShard, MoveProgress }

/**
 * What {@link movePostgresShards} takes. The SQL options (`marginMs`, `maxDriftMs`, ...) are those of the
 * shards' installation on the new home, as for `installPostgres`; `worker` and `cache` default to
 * what the old home recorded for each shard.
 */
export interface MovePostgresOptions extends PostgresSqlOptions {
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

/** What {@link movePostgresShards} did. */
export interface MovePostgresResult {
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
export async function movePostgresShards(
  options: MovePostgresOptions,
): Promise<MovePostgresResult> {
  const resolved = resolveSqlOptions(options, {
    where: 'movePostgresShards options',
    more: ['from', 'to', 'shards', 'onProgress', 'lockTimeoutMs'],
  })
  checkClient('movePostgresShards (from)', options.from)
  checkClient('movePostgresShards (to)', options.to)
  checkCallback('onProgress', options.onProgress)
  const shards = readShardList(options.shards, resolved.sharding)
  const lockTimeoutMs = checkMoveEnds(options, 'database')
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
    // The new home keeps the old home's worker and cache unless told otherwise.
    const optionsOf = (shard: number) => {
      const own = recorded.get(shard)!
      return resolveSqlOptions({
        ...options,
        worker: options.worker ?? own.worker,
        cache: options.cache ?? own.cache,
      })
    }
    const moved = await moveShards({
      shards,
      onProgress: options.onProgress,
      steps: {
        fence: (shard) =>
          step('old', shard, lockTimeoutMs, () =>
            fence(from, optionsOf(shard), shard, destination, lockTimeoutMs),
          ),
        arrive: (shard, fenced) =>
          step('new', shard, lockTimeoutMs, () =>
            arrive(to, optionsOf(shard), shard, fenced.fencedAt, lockTimeoutMs),
          ),
      },
    })
    for (const session of sessions) session.release()
    return { sharding: resolved.sharding.toJSON(), schema: resolved.schema, shards: moved }
  } catch (error) {
    for (const session of sessions) session.release(error instanceof Error ? error : undefined)
    throw translate(error, 'movePostgresShards')
  }
}
