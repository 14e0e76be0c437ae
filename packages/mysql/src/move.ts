import {
  ConfigurationError,
  checkMoveEnds,
  formatShardList,
  LockTimeoutError,
  type MovedShard,
  type MoveProgress,
  moveShards,
  readShardList,
  ShardflakeError,
  type ShardingDescription,
  type ShardList,
  ShardMovedError,
} from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { connectFailure, translateError } from './errors'
import { shardSchemaName } from './identifiers'
import { checkCallback } from './installer'
import { describeServer, MoveSession, type Stage, sameServer } from './move-session'
import { arrive, fence } from './move-steps'
import { checkPool } from './pool'
import { detectDialect, readShardState } from './shard-state'
import {
  type CounterEngine,
  checkSqlOptions,
  type MysqlDialect,
  type MysqlSqlOptions,
  type ResolvedSqlOptions,
  resolveSqlOptions,
} from './sql/options'

export type { MovedShard, MoveProgress }

/** What {@link moveMysqlShards} takes. */
export interface MoveMysqlOptions extends Omit<MysqlSqlOptions, 'dialect'> {
  /** The server the shards live on now (their old home). */
  from: Pool
  /** The server that takes them over (their new home). Installed there when missing. */
  to: Pool
  /** The logical shards to move: a list, `{ from, to }` or `"0-99,200"`. */
  shards: ShardList
  /** The new home's dialect; `'auto'` asks the server. @default 'auto' */
  dialect?: MysqlDialect | 'auto'
  /**
   * Engine of the counter on the new home.
   * @default the old home's counter engine, where the new home's dialect has it
   */
  counterEngine?: CounterEngine
  /** Called after each shard has arrived (switch that shard in your shard map from here on). */
  onProgress?: (progress: MoveProgress) => void
  /**
   * The longest each step waits for the locks it needs (open transactions that called the
   * shard's routines, another move of the same shard). Rounded up to whole seconds. Past it the
   * move stops with `LockTimeoutError`; run it again (it resumes).
   * @default 5000
   */
  lockTimeoutMs?: number
}

/** What {@link moveMysqlShards} did. */
export interface MoveMysqlResult {
  sharding: ShardingDescription
  schemaPrefix: string
  /** The new home's dialect. */
  dialect: MysqlDialect
  /** The shards moved, ascending. */
  shards: MovedShard[]
}

/**
 * Moves logical shards from one MySQL/MariaDB server to another without ever repeating an ID,
 * shard by shard: it **fences** the old home (its drawing routines refuse with SQLSTATE `SF005`,
 * the move is recorded, its counter is pushed past the end of the time field in one statement,
 * L kept), then installs the shard on the new home if needed and moves its counter to at least
 * L before its routines are (re)created there. Why this never repeats an ID is in docs/move.md.
 *
 * Between the fence and your shard map pointing at the new home, IDs of the shard are refused
 * (`MysqlSource` throws `ShardMovedError`): switch each shard when `onProgress` reports it.
 * Idempotent and resumable. No rows move: copy the shard's rows yourself.
 *
 * @example
 * ```ts
 * import { defineSharding, instagram } from '@shardflake/core'
 * import { createMysqlPool, moveMysqlShards } from '@shardflake/mysql'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
 * const result = await moveMysqlShards({
 *   sharding,
 *   from: await createMysqlPool('mysql://root@db-a:3306/app'),
 *   to: await createMysqlPool('mysql://root@db-b:3306/app'),
 *   shards: '1000-1099',
 * })
 * result.shards[0]?.fencedAt
 * ```
 * @throws ConfigurationError when `from` and `to` are the same server or a shard is not installed on `from`.
 * @throws ShardMovedError when `from` recorded a move of a shard to another server, or `to` moved it on since.
 * @throws ShardingMismatchError when `from` or `to` holds another sharding.
 * @throws LockTimeoutError when a lock was not granted within `lockTimeoutMs`.
 */
export async function moveMysqlShards(options: MoveMysqlOptions): Promise<MoveMysqlResult> {
  // Validates the sharding, the prefix and the numbers before anything is opened.
  checkSqlOptions('moveMysqlShards', options, [
    'from',
    'to',
    'shards',
    'onProgress',
    'lockTimeoutMs',
  ])
  checkPool('moveMysqlShards (from)', options.from)
  checkPool('moveMysqlShards (to)', options.to)
  checkCallback('onProgress', options.onProgress)
  const { counterEngine: _engine, ...rest } = options
  const base = resolveSqlOptions({ ...rest, dialect: 'mariadb' }, 'moveMysqlShards')
  const shards = readShardList(options.shards, base.sharding)
  shardSchemaName(shards[shards.length - 1]!, base.schemaPrefix)
  const lockTimeoutMs = checkMoveEnds(options, 'server')
  let from: MoveSession | undefined
  let to: MoveSession | undefined
  let failure: unknown
  try {
    from = new MoveSession(await options.from.getConnection().catch(failedToConnect))
    to = new MoveSession(await options.to.getConnection().catch(failedToConnect))
    return await move(options, base, shards, lockTimeoutMs, from, to)
  } catch (error) {
    failure = error
    throw translateError(error, { what: 'a server of the move (run the move again: it resumes)' })
  } finally {
    await from?.close(failure)
    await to?.close(failure)
  }
}

async function move(
  options: MoveMysqlOptions,
  base: ResolvedSqlOptions,
  shards: number[],
  lockTimeoutMs: number,
  from: MoveSession,
  to: MoveSession,
): Promise<MoveMysqlResult> {
  if (await sameServer(from, to)) {
    throw new ConfigurationError(
      'from and to are the same server (two connections to it): a logical shard moves from one server to another (its database has the same name on both).',
    )
  }
  const fromDialect = await detectDialect(from.connection)
  const toDialect =
    options.dialect === undefined || options.dialect === 'auto'
      ? await detectDialect(to.connection)
      : options.dialect
  const destination = await describeServer(to)
  const engines = await checkMove(from, to, base, shards, destination)
  await from.limitLockWaits(lockTimeoutMs)
  await to.limitLockWaits(lockTimeoutMs)
  const oFrom = resolveSqlOptions({ ...options, counterEngine: undefined, dialect: fromDialect })
  // Resolved (and so checked: an engine the new home's dialect lacks) before anything changes.
  const oTo = new Map(
    shards.map((shard) => [
      shard,
      resolveSqlOptions({
        ...options,
        dialect: toDialect,
        counterEngine: options.counterEngine ?? inheritedEngine(engines.get(shard), toDialect),
      }),
    ]),
  )
  const moved = await moveShards({
    shards,
    onProgress: options.onProgress,
    steps: {
      fence: (shard) => fence(from, oFrom, shard, destination),
      arrive: (shard, fenced) => arrive(to, oTo.get(shard)!, shard, fenced.fencedAt, fenced.moveId),
      around: async (shard, work) => {
        const lock = `sf_move_${shardSchemaName(shard, base.schemaPrefix)}`.slice(0, 64)
        await from.lock(lock, lockTimeoutMs, shard, 'old')
        await to.lock(lock, lockTimeoutMs, shard, 'new')
        try {
          return await work()
        } catch (error) {
          throw stepError(error, shard, from.stage)
        } finally {
          await from.unlock(lock)
          await to.unlock(lock)
        }
      },
    },
  })
  return {
    sharding: base.sharding.toJSON(),
    schemaPrefix: base.schemaPrefix,
    dialect: toDialect,
    shards: moved,
  }
}

/** Everything that would make the move fail half-way, checked before anything changes. */
async function checkMove(
  from: MoveSession,
  to: MoveSession,
  o: ResolvedSqlOptions,
  shards: number[],
  destination: string,
): Promise<Map<number, string | undefined>> {
  const missing: number[] = []
  const engines = new Map<number, string | undefined>()
  for (const shard of shards) {
    const database = shardSchemaName(shard, o.schemaPrefix)
    const old = await readShardState(from.connection, database)
    if (old?.layoutKey === undefined || old.counter === undefined) {
      missing.push(shard)
      continue
    }
    if (old.sharding)
      o.sharding.checkSame(old.sharding, `database ${database} on the old server (from)`)
    if (old.movedTo !== undefined && old.movedTo !== destination) {
      throw new ShardMovedError(
        shard,
        `Logical shard ${shard} moved from the old server (from) to ${old.movedTo}${old.movedAt === undefined ? '' : ` on ${old.movedAt}`} already, not to ${destination}: move it from there. Nothing was changed.`,
      )
    }
    const arriving = await readShardState(to.connection, database)
    if (
      arriving?.movedTo !== undefined &&
      old.moveId !== undefined &&
      arriving.arrivedBy === old.moveId
    ) {
      // This very move brought the shard to `to`, and it has moved on from there since: `to` is
      // not its home any more, and lifting its fence would give the shard two homes.
      throw new ShardMovedError(
        shard,
        `Logical shard ${shard} moved on from the new server (to) to ${arriving.movedTo}${arriving.movedAt === undefined ? '' : ` on ${arriving.movedAt}`}, after this move had brought it there: it lives there now. Move it from there. Nothing was changed.`,
      )
    }
    if (arriving?.sharding) {
      o.sharding.checkSame(arriving.sharding, `database ${database} on the new server (to)`)
    }
    const [rows] = await from.connection.query(
      `SELECT ENGINE AS engine FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'sf_counter'`,
      [database],
    )
    const engine = (rows as { engine?: unknown }[])[0]?.engine
    engines.set(shard, typeof engine === 'string' ? engine : undefined)
  }
  if (missing.length > 0) {
    throw new ConfigurationError(
      `Logical shard(s) ${formatShardList(missing)} not installed in database(s) ${o.schemaPrefix}<n> of the old server (from): nothing to move. Nothing was changed.`,
    )
  }
  return engines
}

/** The old home's counter engine, where the new home's dialect has it. */
function inheritedEngine(
  engine: string | undefined,
  dialect: MysqlDialect,
): CounterEngine | undefined {
  const known = (['Aria', 'MyISAM', 'InnoDB'] as const).find(
    (name) => name.toLowerCase() === engine?.toLowerCase(),
  )
  if (known === 'Aria' && dialect === 'mysql8') return undefined
  return known
}

/** A failed step of one shard as a clear error: where the shard stands, and what to do. */
function stepError(error: unknown, shard: number, stage: Stage): ShardflakeError {
  if (error instanceof ShardflakeError) return error
  const translated = translateError(error, {
    what: `logical shard ${shard} being moved`,
    shard,
  })
  if (translated.code !== 'LOCK_TIMEOUT') return translated
  const state =
    stage === 'untouched'
      ? 'Nothing of this shard was changed'
      : 'It is fenced on the old server and not yet served by the new one'
  return new LockTimeoutError(
    `Moving logical shard ${shard}: a lock was not granted within lockTimeoutMs (a transaction that called the shard's routines, or an install, is still open). ${state}; run the move again (it resumes), or raise lockTimeoutMs.`,
    { cause: error },
  )
}

function failedToConnect(error: unknown): never {
  throw connectFailure(error)
}
