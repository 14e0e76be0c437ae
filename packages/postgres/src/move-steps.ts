import {
  ConfigurationError,
  formatShardList,
  LockTimeoutError,
  ShardflakeError,
  ShardMovedError,
  SourceUnavailableError,
} from '@shardflake/core'
import type { Session } from './client'
import { checkInstalled, readShardingFrom, translate } from './installer'
import { quoteIdentifier, shardSchemaName } from './names'
import { fenceScript } from './sql/fence'
import type { ResolvedSqlOptions } from './sql/options'
import { shardScript } from './sql/shard'

// The steps of movePostgresShards (move.ts): the checks before anything changes, the fence on the
// old home and the arrival on the new one.

/**
 * Whether two sessions reach the same database: one holds a random advisory lock, and the other
 * can take it only in another database (advisory locks are per database). No privileges needed,
 * and it sees through different host names, ports, proxies and sockets.
 */
export async function sameDatabase(a: Session, b: Session): Promise<boolean> {
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
export interface Recorded {
  worker: number
  cache: number
}

/** Everything that would make the move fail half-way, checked before anything changes. */
export async function checkMove(
  from: Session,
  to: Session,
  o: ResolvedSqlOptions,
  shards: number[],
  destination: string,
): Promise<Map<number, Recorded>> {
  const c = quoteIdentifier('schema', o.schema)
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
export async function describeDatabase(session: Session): Promise<string> {
  const [row] = await session.query(
    'SELECT current_database() AS db, host(inet_server_addr()) AS host, inet_server_port() AS port',
  )
  const at = row?.host ? ` on ${String(row.host)}:${String(row.port)}` : ''
  return `database ${String(row?.db)}${at}`
}

/** Fences the shard on its old home; L, and whether it was fenced already. */
export async function fence(
  session: Session,
  o: ResolvedSqlOptions,
  shard: number,
  destination: string,
  lockTimeoutMs: number,
): Promise<{ fencedAt: bigint; resumed: boolean }> {
  const c = quoteIdentifier('schema', o.schema)
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
    await session.exec(fenceScript(o, shard))
    const [row] = await session.query(
      `UPDATE ${c}.shards SET moved_to = $2 WHERE shard = $1 RETURNING fence_value::text AS fence`,
      [shard, destination],
    )
    await session.exec('COMMIT')
    return { fencedAt: BigInt(String(row?.fence)), resumed: before?.retired === true }
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
export async function arrive(
  session: Session,
  o: ResolvedSqlOptions,
  shard: number,
  fenceValue: bigint,
  lockTimeoutMs: number,
): Promise<{ aheadMs: number }> {
  const c = quoteIdentifier('schema', o.schema)
  const s = quoteIdentifier('schema', shardSchemaName(shard, o.schemaPrefix))
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
    await session.exec(shardScript(o, shard))
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
export async function step<T>(
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
