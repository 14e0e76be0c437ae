import {
  ConfigurationError,
  formatShardList,
  InvalidArgumentError,
  LockTimeoutError,
  readShardList,
  ShardflakeError,
  type ShardingDescription,
  type ShardList,
  ShardMovedError,
  SourceUnavailableError,
} from '@shardflake/core'
import { openSession, type Session, type SqlClient } from './client'
import { quoteIdent } from './identifiers'
import { checkInstalled, readShardingFrom, transaction, translate } from './installer'
import {
  commonSql,
  fenceSql,
  type PostgresSqlOptions,
  type ResolvedSqlOptions,
  resolveSqlOptions,
  retirementColumnsSql,
  shardSchemaName,
  shardSql,
} from './sql'

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
 * shard: (1) **fences** the old home ({@link fenceSql}: its sequence can no longer advance past
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
    await transaction(to, resolved, commonSql(resolved))
    await transaction(from, resolved, retirementColumnsSql(resolved))
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

/**
 * Whether two sessions reach the same database: one holds a random advisory lock, and the other
 * can take it only in another database (advisory locks are per database). No privileges needed,
 * and it sees through different host names, ports, proxies and sockets.
 */
async function sameDatabase(a: Session, b: Session): Promise<boolean> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const key = crypto.getRandomValues(new BigInt64Array(1))[0]!.toString()
    const [held] = await a.query('SELECT pg_try_advisory_lock($1::bigint) AS ok', [key])
    if (held?.ok !== true) continue // someone holds this very key: draw another
    try {
      const [other] = await b.query('SELECT pg_try_advisory_lock($1::bigint) AS ok', [key])
      if (other?.ok !== true) return true
      await b.query('SELECT pg_advisory_unlock($1::bigint)', [key])
      return false
    } finally {
      await a.query('SELECT pg_advisory_unlock($1::bigint)', [key])
    }
  }
  throw new SourceUnavailableError(
    'Could not tell whether from and to are the same database (no free advisory lock key).',
  )
}

/** The old home's worker and cache of each shard. */
interface Recorded {
  worker: number
  cache: number
}

/** Everything that would make the move fail half-way, checked before anything changes. */
async function checkMove(
  from: Session,
  to: Session,
  o: ResolvedSqlOptions,
  shards: number[],
  destination: string,
): Promise<Map<number, Recorded>> {
  const c = quoteIdent('schema', o.schema)
  const oldHome = await readShardingFrom(from.query, o.schema)
  if (!oldHome) {
    throw new ConfigurationError(
      `No shardflake installation is recorded in schema ${JSON.stringify(o.schema)} of the old database (from): nothing to move from there (or pass the schema it was installed with).`,
    )
  }
  checkInstalled(o.sharding, { ...oldHome, database: `The old ${oldHome.database} (from)` })
  const newHome = await readShardingFrom(to.query, o.schema)
  if (newHome)
    checkInstalled(o.sharding, { ...newHome, database: `The new ${newHome.database} (to)` })
  const rows = await from.query(
    `SELECT shard, schema_name, worker, sequence_cache,
       to_regclass(quote_ident(schema_name) || '.id_seq') IS NOT NULL AS present
     FROM ${c}.shards WHERE shard = ANY($1::integer[])`,
    [shards],
  )
  const recorded = new Map<number, Recorded>()
  for (const row of rows) {
    const shard = Number(row.shard)
    if (row.schema_name === shardSchemaName(shard, o.schemaPrefix) && row.present === true) {
      recorded.set(shard, { worker: Number(row.worker), cache: Number(row.sequence_cache) })
    }
  }
  const missing = shards.filter((shard) => !recorded.has(shard))
  if (missing.length > 0) {
    throw new ConfigurationError(
      `Logical shard(s) ${formatShardList(missing)} not installed in schema ${o.schemaPrefix}<n> of the old database (from): nothing to move. Nothing was changed.`,
    )
  }
  // A shard already moved away from `from` may only be resumed towards the same database, and
  // not once that database has moved it on: lifting its fence would give the shard two homes.
  const retiredFrom = await retirements(from, c, shards)
  const retiredTo = newHome
    ? await retirements(to, c, shards)
    : new Map<number, string | undefined>()
  for (const [shard, movedTo] of retiredFrom) {
    // (No destination recorded: fenced by hand, or by a move that died before recording it.)
    if (movedTo !== undefined && movedTo !== destination) {
      throw new ShardMovedError(
        shard,
        `Logical shard ${shard} already moved from the old database (from) to ${movedTo}, not to this new one (${destination}): move it from there. Nothing was changed.`,
      )
    }
    if (retiredTo.has(shard)) {
      throw new ShardMovedError(
        shard,
        `Logical shard ${shard} already moved from the old database (from) to the new one (to), which has since moved it on to ${retiredTo.get(shard) ?? 'another database'}: this is a stale re-run. Nothing was changed.`,
      )
    }
  }
  if (newHome) {
    const taken = await to.query(
      `SELECT shard, schema_name FROM ${c}.shards WHERE shard = ANY($1::integer[]) AND schema_name <> $2::text || shard::text`,
      [shards, o.schemaPrefix],
    )
    if (taken.length > 0) {
      throw new ConfigurationError(
        `The new database (to) holds logical shard(s) ${taken.map((row) => `${String(row.shard)} in schema ${String(row.schema_name)}`).join(', ')}, not in ${o.schemaPrefix}<n>: one shard must have one source. Nothing was changed.`,
      )
    }
  }
  return recorded
}

/**
 * The shards of `shards` a database has retired (moved away), with where they went (when that was
 * recorded). Read through
 * `to_jsonb` so a metadata table from before the retirement columns reads as "none retired".
 */
async function retirements(
  session: Session,
  c: string,
  shards: number[],
): Promise<Map<number, string | undefined>> {
  const rows = await session.query(
    `SELECT s.shard, to_jsonb(s) ->> 'moved_to' AS moved_to FROM ${c}.shards AS s
     WHERE s.shard = ANY($1::integer[]) AND to_jsonb(s) ->> 'retired_at' IS NOT NULL`,
    [shards],
  )
  return new Map(
    rows.map((row) => [Number(row.shard), row.moved_to == null ? undefined : String(row.moved_to)]),
  )
}

/** A name for the new home, recorded on the old one (no credentials: what the server says). */
async function describeDatabase(session: Session): Promise<string> {
  const [row] = await session.query(
    'SELECT current_database() AS db, host(inet_server_addr()) AS host, inet_server_port() AS port',
  )
  const at = row?.host ? ` on ${String(row.host)}:${String(row.port)}` : ''
  return `database ${String(row?.db)}${at}`
}

/** Fences the shard on its old home; L, and whether it was fenced already. */
async function fence(
  session: Session,
  o: ResolvedSqlOptions,
  shard: number,
  destination: string,
  lockTimeoutMs: number,
): Promise<{ fence: bigint; resumed: boolean }> {
  const c = quoteIdent('schema', o.schema)
  await session.exec('BEGIN')
  try {
    await session.exec(
      `SET LOCAL lock_timeout = '${lockTimeoutMs}ms';\nSET LOCAL client_min_messages = warning;`,
    )
    await session.query(`SELECT pg_advisory_xact_lock(${o.lockKey}, -1)`)
    const [before] = await session.query(
      `SELECT retired_at IS NOT NULL AS retired FROM ${c}.shards WHERE shard = $1`,
      [shard],
    )
    await session.exec(fenceSql(o, shard))
    const [row] = await session.query(
      `UPDATE ${c}.shards SET moved_to = $2 WHERE shard = $1 RETURNING fence_value::text AS fence`,
      [shard, destination],
    )
    await session.exec('COMMIT')
    return { fence: BigInt(String(row?.fence)), resumed: before?.retired === true }
  } catch (error) {
    await session.exec('ROLLBACK').catch(() => undefined)
    throw error
  }
}

/**
 * Installs the shard on its new home when needed (lifting the fence of an earlier move away from
 * it) and moves its sequence to at least L, in one transaction: nobody draws there from a
 * sequence below L.
 */
async function arrive(
  session: Session,
  o: ResolvedSqlOptions,
  shard: number,
  fenceValue: bigint,
  lockTimeoutMs: number,
): Promise<{ aheadMs: number }> {
  const c = quoteIdent('schema', o.schema)
  const s = quoteIdent('schema', shardSchemaName(shard, o.schemaPrefix))
  await session.exec('BEGIN')
  try {
    await session.exec(
      `SET LOCAL lock_timeout = '${lockTimeoutMs}ms';\nSET LOCAL client_min_messages = warning;`,
    )
    await session.query(`SELECT pg_advisory_xact_lock(${o.lockKey}, -1)`)
    await session.query(
      `UPDATE ${c}.shards SET retired_at = NULL, moved_to = NULL, fence_value = NULL WHERE shard = $1`,
      [shard],
    )
    await session.exec(shardSql(o, shard))
    const [row] = await session.query(
      `SELECT ${s}._advance_to($1::bigint)::text AS sequence, ${c}.now_ms()::text AS now`,
      [fenceValue.toString()],
    )
    await session.exec('COMMIT')
    const { layout } = o
    const fenceMs =
      Number(fenceValue >> BigInt(layout.sequenceBits)) * layout.timeUnitMs + layout.epoch
    return { aheadMs: fenceMs - Number(row?.now) }
  } catch (error) {
    await session.exec('ROLLBACK').catch(() => undefined)
    throw error
  }
}

/** Runs one step of one shard; a lock not granted in time becomes a clear error. */
async function step<T>(
  home: 'old' | 'new',
  shard: number,
  lockTimeoutMs: number,
  run: () => Promise<T>,
): Promise<T> {
  try {
    return await run()
  } catch (error) {
    if (error instanceof ShardflakeError) throw error
    if ((error as { code?: unknown } | undefined)?.code === '55P03') {
      const state =
        home === 'old'
          ? 'Nothing of this shard was changed'
          : 'It is fenced on the old database and not yet served by the new one'
      throw new LockTimeoutError(
        `Moving logical shard ${shard}: a lock on the ${home} database was not granted within ${lockTimeoutMs} ms (a transaction that drew IDs of the shard, or another install or move, is still open there). ${state}; run the move again (it resumes), or raise lockTimeoutMs (--lock-timeout-ms).`,
        { cause: error },
      )
    }
    throw translate(error, 'movePostgresShards')
  }
}
