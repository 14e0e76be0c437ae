import {
  ConfigurationError,
  formatShardList,
  InvalidArgumentError,
  type Layout,
  LayoutMismatchError,
  readShardList,
  ShardflakeError,
  type ShardList,
  SourceUnavailableError,
} from '@shardflake/core'
import type { Pool, PoolConnection } from 'mysql2/promise'
import { asDriverError, isConnectionError, translateRoutineError } from './errors'
import { detectDialect, readShardState } from './installer'
import {
  type CounterEngine,
  counterLimit,
  fenceStatements,
  layoutKey,
  type MysqlDialect,
  type MysqlSqlOptions,
  type ResolvedSqlOptions,
  resolveSqlOptions,
  shardDatabase,
  shardRoutineStatements,
  shardSetupStatements,
} from './sql'

/** What {@link moveMysqlShards} takes. */
export interface MoveMysqlOptions extends Omit<MysqlSqlOptions, 'dialect'> {
  /** The server the shards live on now (their old home). */
  from: Pool
  /** The server that takes them over (their new home). Installed there when missing. */
  to: Pool
  /** The logical shards to move: a list, `{ from, to }` or `"0-99,200"`. */
  shards: ShardList
  /**
   * The new home's dialect; `'auto'` asks the server. (The old home's is asked for always.)
   * @default 'auto'
   */
  dialect?: MysqlDialect | 'auto'
  /**
   * Engine of the counter on the new home.
   * @default the old home's counter engine, where the new home's dialect has it; else that
   * dialect's default
   */
  counterEngine?: CounterEngine
  /** Called after each shard has arrived (switch that shard in your shard map from here on). */
  onProgress?: (progress: MoveProgress) => void
  /**
   * The longest each step waits for the locks it needs: on the old home, for the transactions
   * that called the shard's routines and are still open (new calls queue behind the fence
   * meanwhile), and for another move of the same shard; on the new home, likewise. MySQL counts
   * these timeouts in whole seconds, so this is rounded up to one. Past it the move stops with
   * `SourceUnavailableError`; run it again (it resumes).
   * @default 5000
   */
  lockTimeoutMs?: number
}

/** Progress of {@link moveMysqlShards}, reported after each shard. */
export interface MoveProgress {
  /** Shards moved so far. */
  done: number
  total: number
  /** The shard just moved: the old home refuses it, the new home serves it. */
  shard: number
  /** L: the old home's final counter; every value it ever issued for the shard is below it. */
  fence: bigint
}

/** One logical shard moved by {@link moveMysqlShards}. */
export interface MovedShard {
  shard: number
  /** L: the old home's final counter (ID space); every value it ever issued is below it. */
  fence: bigint
  /** Where the new home's counter stands after the move (at least `fence`). */
  counter: bigint
  /**
   * How far L is ahead of the new home's clock, in ms (0 or less: not ahead). Above `maxDriftMs`
   * (a burst on the old home, or its clock ahead of the new one) the first draws there wait for
   * the clock (`MysqlSource`, up to `maxWaitMs`), or fail with `shardflake:CLOCK` until it
   * catches up.
   */
  aheadMs: number
  /** The old home was fenced already (a move run again, or after it stopped half-way). */
  resumed: boolean
}

/** What {@link moveMysqlShards} did. */
export interface MoveMysqlResult {
  layout: Layout
  schemaPrefix: string
  /** The new home's dialect. */
  dialect: MysqlDialect
  /** The shards moved, ascending. */
  shards: MovedShard[]
}

/**
 * Moves logical shards from one MySQL/MariaDB server to another without ever repeating an ID,
 * shard by shard:
 *
 * 1. **fences** the old home ({@link mysqlFenceStatements}): its drawing routines are replaced by
 *    ones that SIGNAL `shardflake:MOVED:...`, the move is recorded in `sf_meta` (`moved_to`,
 *    `moved_at`, `moved_fence`, `move_id`; `installMysqlShards` then refuses the shard there), and its
 *    counter is read and pushed past the end of the layout's time field **in one statement**, so
 *    that a reserve still running an old routine body afterwards finds no room and issues
 *    nothing. Its last value L is kept in the row;
 * 2. installs the shard on the new home if needed and moves its counter to at least L
 *    (`GREATEST`, never backwards) **before** its drawing routines are (re)created there.
 *
 * Every value the old home issued is below L; every value the new home issues from then on is at
 * least L. Between (1) and your shard map pointing at the new home, IDs of the shard are refused
 * (`MysqlSource` throws `ConfigurationError` telling you to update the shard map): switch each
 * shard when `onProgress` reports it. The new home must not have served the shard before the
 * move: IDs it issued earlier are not covered.
 *
 * Idempotent and resumable: run it again after a failure half-way and it recognises a fenced old
 * home (L stays), and never moves a counter backwards. Moving a shard back to a server it left
 * lifts that server's fence. Both servers take a named lock (`GET_LOCK`) per shard, so two moves
 * of one shard do not interleave. No data moves: copy the shard's rows yourself.
 *
 * @throws ConfigurationError when `from` and `to` are the same server, a shard is not installed on
 *   `from`, `from` recorded a move of it to another server, or this very move brought it to `to`
 *   and `to` has moved it on since (lifting that fence would give the shard two homes).
 * @throws InvalidArgumentError for a `lockTimeoutMs` out of range, or a `counterEngine` the new
 *   home's dialect lacks.
 * @throws LayoutMismatchError when `from` holds another layout than `layout`, or `to` than `from`.
 * @throws InvalidIdentifierError for a prefix that is not a plain identifier.
 * @throws SourceUnavailableError when a lock was not granted within `lockTimeoutMs`.
 * @example
 * ```ts
 * import { instagram } from '@shardflake/core'
 * import { createMysqlPool, moveMysqlShards } from '@shardflake/mysql'
 *
 * const result = await moveMysqlShards({
 *   from: await createMysqlPool(process.env.SERVER_A!),
 *   to: await createMysqlPool(process.env.SERVER_B!),
 *   layout: instagram,
 *   shards: '1000-1099',
 *   onProgress: ({ shard }) => shardMapStore.assign(shard, 'B'), // your shard map
 * })
 * ```
 */
export async function moveMysqlShards(options: MoveMysqlOptions): Promise<MoveMysqlResult> {
  // Validates the layout, the prefix and the numbers before anything is opened.
  const { counterEngine: _engine, ...rest } = options
  const base = resolveSqlOptions({ ...rest, dialect: 'mariadb' })
  const shards = readShardList(options.shards, base.layout)
  const lockTimeoutMs = options.lockTimeoutMs ?? 5000
  if (!Number.isSafeInteger(lockTimeoutMs) || lockTimeoutMs < 1 || lockTimeoutMs > 3_600_000) {
    throw new InvalidArgumentError(
      `lockTimeoutMs must be an integer from 1 to 3600000, got ${String(lockTimeoutMs)}.`,
    )
  }
  if (options.from === options.to) {
    throw new ConfigurationError(
      'from and to are the same server: a logical shard moves from one server to another.',
    )
  }
  const from = new Session(await options.from.getConnection())
  let to: Session | undefined
  let failure: unknown
  try {
    to = new Session(await options.to.getConnection())
    return await move(options, base, shards, lockTimeoutMs, from, to)
  } catch (error) {
    failure = error
    throw translate(error)
  } finally {
    await from.close(failure)
    await to?.close(failure)
  }
}

async function move(
  options: MoveMysqlOptions,
  base: ResolvedSqlOptions,
  shards: number[],
  lockTimeoutMs: number,
  from: Session,
  to: Session,
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
  const moved: MovedShard[] = []
  for (const shard of shards) {
    const database = shardDatabase(base.schemaPrefix, shard)
    const lock = `sf_move_${database}`.slice(0, 64)
    await from.lock(lock, lockTimeoutMs, shard, 'old')
    await to.lock(lock, lockTimeoutMs, shard, 'new')
    try {
      const fenced = await fence(from, oFrom, shard, destination)
      const arrived = await arrive(to, oTo.get(shard)!, shard, fenced.fence, fenced.moveId)
      moved.push({ shard, fence: fenced.fence, resumed: fenced.resumed, ...arrived })
    } catch (error) {
      throw stepError(error, shard, from.stage)
    } finally {
      await from.unlock(lock)
      await to.unlock(lock)
    }
    options.onProgress?.({
      done: moved.length,
      total: shards.length,
      shard,
      fence: moved[moved.length - 1]!.fence,
    })
  }
  return {
    layout: base.layout,
    schemaPrefix: base.schemaPrefix,
    dialect: toDialect,
    shards: moved,
  }
}

/** Everything that would make the move fail half-way, checked before anything changes. */
async function checkMove(
  from: Session,
  to: Session,
  o: ResolvedSqlOptions,
  shards: number[],
  destination: string,
): Promise<Map<number, string | undefined>> {
  const key = layoutKey(o.layout)
  const missing: number[] = []
  const engines = new Map<number, string | undefined>()
  for (const shard of shards) {
    const database = shardDatabase(o.schemaPrefix, shard)
    const old = await readShardState(from.connection, database)
    if (old?.layoutKey === undefined || old.counter === undefined) {
      missing.push(shard)
      continue
    }
    if (old.layoutKey !== key) {
      throw new LayoutMismatchError(
        `The old server (from) holds logical shard ${shard} (database ${database}) with layout ${old.layoutKey}, not ${key}: give the move the installed layout. Nothing was changed.`,
      )
    }
    if (old.movedTo !== undefined && old.movedTo !== destination) {
      throw new ConfigurationError(
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
      throw new ConfigurationError(
        `Logical shard ${shard} moved on from the new server (to) to ${arriving.movedTo}${arriving.movedAt === undefined ? '' : ` on ${arriving.movedAt}`}, after this move had brought it there: it lives there now. Move it from there. Nothing was changed.`,
      )
    }
    if (arriving?.layoutKey !== undefined && arriving.layoutKey !== key) {
      throw new LayoutMismatchError(
        `The new server (to) holds logical shard ${shard} (database ${database}) with layout ${arriving.layoutKey}, the old one (from) with ${key}: IDs of the moved shard would lose their order and could repeat. Move it to a server without it, or with the same layout. Nothing was changed.`,
      )
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

/**
 * Fences the shard on its old home (see `mysqlFenceStatements`); L, and whether it was fenced
 * already.
 */
async function fence(
  session: Session,
  o: ResolvedSqlOptions,
  shard: number,
  destination: string,
): Promise<{ fence: bigint; resumed: boolean; moveId: string }> {
  const database = shardDatabase(o.schemaPrefix, shard)
  const limit = counterLimit(o.layout)
  const before = await readShardState(session.connection, database)
  const resumed = before?.movedTo !== undefined || (before?.counter ?? 0n) > limit
  session.stage = resumed ? 'fenced' : 'untouched'
  for (const statement of fenceStatements(o, shard, destination)) {
    await session.connection.query(statement)
    session.stage = 'fenced'
  }
  const after = await readShardState(session.connection, database)
  if (after?.counter === undefined || after.counter <= limit || after.moveId === undefined) {
    throw new ConfigurationError(
      `The counter of logical shard ${shard} on the old server (${database}.sf_counter) is missing, or was not fenced and recorded; it was changed during the move. Run the move again.`,
    )
  }
  let fenceValue = after.counter - limit - 1n
  // The recorded L (InnoDB, durable) wins over a counter row that lost writes in a crash.
  if (after.movedFence !== undefined && after.movedFence > fenceValue) fenceValue = after.movedFence
  return { fence: fenceValue, resumed, moveId: after.moveId }
}

/**
 * Installs the shard on its new home when needed (lifting the fence of an earlier move away from
 * it), moves its counter to at least L, and only then (re)creates its drawing routines there: no
 * routine of the new home ever draws from a counter below L.
 */
async function arrive(
  session: Session,
  o: ResolvedSqlOptions,
  shard: number,
  fenceValue: bigint,
  moveId: string,
): Promise<{ counter: bigint; aheadMs: number }> {
  const database = shardDatabase(o.schemaPrefix, shard)
  const db = `\`${database}\``
  const limit = counterLimit(o.layout)
  session.stage = 'arriving'
  const state = await readShardState(session.connection, database)
  if (state?.movedTo !== undefined) {
    // Moving back: this server's fence stays in its counter until the UPDATE below lifts it.
    await session.connection.query(
      `DELETE FROM ${db}.\`sf_meta\` WHERE \`name\` IN ('moved_to', 'moved_at', 'moved_fence', 'move_id')`,
    )
  }
  for (const statement of shardSetupStatements(o, shard)) {
    await session.connection.query(statement)
  }
  // Before the counter and the routines: once they serve here, this move cannot lift a fence
  // this server gets later (a move onwards).
  await session.connection.query(
    `INSERT INTO ${db}.\`sf_meta\` (\`name\`, \`value\`) VALUES ('arrived_by', ?) ON DUPLICATE KEY UPDATE \`value\` = VALUES(\`value\`)`,
    [moveId],
  )
  await session.connection.query(
    `UPDATE ${db}.\`sf_counter\` SET \`v\` = GREATEST(IF(\`v\` > ${limit}, \`v\` - ${limit + 1n}, \`v\`), ${fenceValue}) WHERE \`k\` = 1`,
  )
  for (const statement of shardRoutineStatements(o, shard)) {
    await session.connection.query(statement)
  }
  const [rows] = await session.connection.query(
    `SELECT CAST(\`v\` AS CHAR) AS v, CAST(FLOOR(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS CHAR) AS now FROM ${db}.\`sf_counter\` WHERE \`k\` = 1`,
  )
  const row = (rows as { v?: unknown; now?: unknown }[])[0]
  const counter = BigInt(String(row?.v))
  if (counter < fenceValue) {
    throw new ConfigurationError(
      `The counter of logical shard ${shard} on the new server stands at ${counter}, below the fence ${fenceValue}; it was changed during the move. Run the move again.`,
    )
  }
  const { layout } = o
  const fenceMs =
    Number(fenceValue >> BigInt(layout.sequenceBits)) * layout.timeUnitMs + layout.epoch
  session.stage = 'done'
  return { counter, aheadMs: fenceMs - Number(row?.now) }
}

/** Where a shard stands when a step fails, for the error message. */
type Stage = 'untouched' | 'fenced' | 'arriving' | 'done'

/** One connection of the move, with what it changed in the session (restored on close). */
class Session {
  stage: Stage = 'untouched'
  private saved: { lock: unknown; innodb: unknown } | undefined
  private readonly held = new Set<string>()

  constructor(readonly connection: PoolConnection) {}

  /** MySQL's lock waits (metadata, InnoDB rows) in whole seconds, at least one. */
  async limitLockWaits(ms: number): Promise<void> {
    const [rows] = await this.connection.query(
      'SELECT @@SESSION.lock_wait_timeout AS `lock`, @@SESSION.innodb_lock_wait_timeout AS innodb',
    )
    const row = (rows as { lock?: unknown; innodb?: unknown }[])[0]
    this.saved = { lock: row?.lock, innodb: row?.innodb }
    const seconds = Math.max(1, Math.ceil(ms / 1000))
    await this.connection.query(
      `SET SESSION lock_wait_timeout = ${seconds}, innodb_lock_wait_timeout = ${seconds}`,
    )
  }

  /** A named lock (`GET_LOCK`), so that two moves of one shard do not interleave. */
  async lock(name: string, ms: number, shard: number, home: 'old' | 'new'): Promise<void> {
    const [rows] = await this.connection.query('SELECT GET_LOCK(?, ?) AS ok', [name, ms / 1000])
    if (Number((rows as { ok?: unknown }[])[0]?.ok) !== 1) {
      throw new SourceUnavailableError(
        `Moving logical shard ${shard}: another move of it holds the lock ${name} on the ${home} server, still after ${ms} ms. Nothing of this shard was changed; run the move again when the other one has ended.`,
      )
    }
    this.held.add(name)
  }

  async unlock(name: string): Promise<void> {
    if (!this.held.delete(name)) return
    await this.connection.query('SELECT RELEASE_LOCK(?)', [name]).catch(() => undefined)
  }

  /** Back to the pool as it came (settings restored, locks released), or destroyed. */
  async close(failure: unknown): Promise<void> {
    try {
      if (failure !== undefined && isConnectionError(failure)) throw failure
      for (const name of [...this.held]) await this.unlock(name)
      if (this.saved) {
        await this.connection.query(
          'SET SESSION lock_wait_timeout = ?, innodb_lock_wait_timeout = ?',
          [this.saved.lock, this.saved.innodb],
        )
      }
      this.connection.release()
    } catch {
      this.connection.destroy()
    }
  }
}

/**
 * Whether two connections reach the same server: one holds a random named lock, and the other
 * sees it taken only on the same server (named locks are per server). No privileges needed; sees
 * through host names, ports, proxies and sockets.
 */
async function sameServer(a: Session, b: Session): Promise<boolean> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const bytes = crypto.getRandomValues(new Uint8Array(12))
    const name = `sf_probe_${[...bytes].map((x) => x.toString(16).padStart(2, '0')).join('')}`
    const [held] = await a.connection.query('SELECT GET_LOCK(?, 0) AS ok', [name])
    if (Number((held as { ok?: unknown }[])[0]?.ok) !== 1) continue
    try {
      const [free] = await b.connection.query('SELECT IS_FREE_LOCK(?) AS free', [name])
      return Number((free as { free?: unknown }[])[0]?.free) !== 1
    } finally {
      await a.connection.query('SELECT RELEASE_LOCK(?)', [name])
    }
  }
  throw new SourceUnavailableError(
    'Could not tell whether from and to are the same server (no free named lock).',
  )
}

/** A name for the new home, recorded on the old one (what the server says; no credentials). */
async function describeServer(session: Session): Promise<string> {
  const [rows] = await session.connection.query('SELECT @@hostname AS host, @@port AS port')
  const row = (rows as { host?: unknown; port?: unknown }[])[0]
  const host = String(row?.host ?? 'unknown')
    // biome-ignore lint/suspicious/noControlCharactersInRegex: they are what is removed
    .replace(/[\u0000-\u001f\u007f]/g, '')
    .slice(0, 40)
  return `server ${host}:${String(row?.port ?? '?')}`
}

/** A failed step of one shard as a clear error: where the shard stands, and what to do. */
function stepError(error: unknown, shard: number, stage: Stage): unknown {
  if (error instanceof ShardflakeError) return error
  const e = asDriverError(error)
  if (e?.code === 'ER_LOCK_WAIT_TIMEOUT' || e?.errno === 1205) {
    const state =
      stage === 'untouched'
        ? 'Nothing of this shard was changed'
        : 'It is fenced on the old server and not yet served by the new one'
    return new SourceUnavailableError(
      `Moving logical shard ${shard}: a lock was not granted within lockTimeoutMs (a transaction that called the shard's routines, or an install, is still open). ${state}; run the move again (it resumes), or raise lockTimeoutMs.`,
      { cause: error },
    )
  }
  return translate(error, shard)
}

function translate(error: unknown, shard = -1): unknown {
  if (error instanceof ShardflakeError) return error
  if (isConnectionError(error)) {
    return new SourceUnavailableError(
      `A server of the move is unavailable (${asDriverError(error)?.code ?? 'connection lost'}). Run the move again (it resumes).`,
      { cause: error },
    )
  }
  return translateRoutineError(error, shard, 0)
}
