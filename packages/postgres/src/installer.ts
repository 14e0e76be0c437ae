import {
  ConfigurationError,
  checkKnownOptions,
  defineLayout,
  defineSharding,
  describeValue,
  type FieldName,
  formatShardList,
  InvalidArgumentError,
  type Layout,
  readInteger,
  readShardList,
  ShardConflictError,
  ShardflakeError,
  type Sharding,
  type ShardingDescription,
  type ShardList,
  ShardMovedError,
} from '@shardflake/core'
import { checkClient, openSession, type Session, type SqlClient } from './client'
import { translatePostgresError } from './errors'
import { quoteIdentifier, setDefaultSql } from './names'
import { commonScript } from './sql/common'
import { type PostgresSqlOptions, type ResolvedSqlOptions, resolveSqlOptions } from './sql/options'
import { shardScript } from './sql/shard'

/** Progress of {@link installPostgres}, reported after each shard. */
export interface InstallProgress {
  /** Shards installed so far. */
  done: number
  total: number
  /** The shard just installed. */
  shard: number
}

/** What {@link installPostgres} takes. */
export interface InstallPostgresOptions extends PostgresSqlOptions {
  /** The logical shards this database holds: `'all'`, a list, `{ from, to }` or `"0-99,200"`. */
  shards: ShardList
  /** Called after each shard (for a progress bar). */
  onProgress?: (progress: InstallProgress) => void
  /**
   * Shards installed per transaction. Each transaction is short, so a long install does not
   * hold locks on the first shards until the last is done.
   * @default 50
   */
  shardsPerTransaction?: number
}

/** What {@link installPostgres} did (the same shape as `installMysql`'s). */
export interface InstallPostgresResult {
  /** The sharding recorded in the database. */
  sharding: ShardingDescription
  /** The shards installed or upgraded, ascending. */
  shards: number[]
  /** The shards that were not installed before. */
  created: number[]
  /** The shards that were installed already (functions replaced, sequences kept). */
  updated: number[]
  dialect: 'postgres'
}

/**
 * Installs (or upgrades, idempotently) the common objects and the `next_id()` of each logical
 * shard on one database. Records the sharding (layout and `logicalShards`) and the shards in
 * `<schema>.layout` and `<schema>.shards`. Everything is checked before anything is created: the
 * layout must still be able to make IDs, every shard must be one of the logical shards, names must
 * be plain identifiers, and a sharding recorded in the database must be this one.
 *
 * Accepts a `pg.Pool` (one connection is used), a `pg.Client` or a PGlite instance.
 *
 * @throws InvalidArgumentError when `client` cannot run statements, or for an unknown option
 *   (naming the closest known one) or a number out of its bounds.
 * @throws ConfigurationError when `sharding` is missing (it names `logicalShards`), or a shard is
 *   already installed under another schema name, or the database named in the connection does
 *   not exist.
 * @throws TimeExhaustedError when the layout's time field is used up.
 * @throws ShardOutOfRangeError for a shard outside the logical shards (checked before expanding).
 * @throws ShardingMismatchError when the database records another layout or `logicalShards`.
 * @throws ShardMovedError when a shard was moved away from this database ({@link movePostgresShards}):
 *   its sequence there is fenced, and only moving it back lifts the fence.
 * @example
 * ```ts
 * import pg from 'pg'
 * import { defineSharding, instagram } from '@shardflake/core'
 * import { installPostgres } from '@shardflake/postgres'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL })
 * await installPostgres(pool, {
 *   sharding,
 *   shards: '0-999',
 *   onProgress: ({ done, total }) => console.error(`${done}/${total}`),
 * })
 * ```
 */
export async function installPostgres(
  client: SqlClient,
  options: InstallPostgresOptions,
): Promise<InstallPostgresResult> {
  checkClient('installPostgres', client)
  const resolved = resolveSqlOptions(options, {
    where: 'installPostgres options',
    more: ['shards', 'onProgress', 'shardsPerTransaction'],
  })
  checkCallback('onProgress', options.onProgress)
  const shards = readShardList(options.shards, resolved.sharding)
  const perTransaction = readInteger('shardsPerTransaction', options.shardsPerTransaction, 50, {
    min: 1,
    max: 10_000,
  })
  const session = await openSession(client).catch((error: unknown) => {
    throw translatePostgresError(error, { what: 'installPostgres', connecting: true })
  })
  try {
    const installed = await readShardingFrom(session.query, resolved.schema)
    if (installed) checkInstalled(resolved.sharding, installed)
    await refuseLeasedWorker(session, resolved)
    const existing = installed ? await readRecordedShards(session, resolved, shards) : new Set()
    await transaction(session, resolved, commonScript(resolved))
    let done = 0
    for (let i = 0; i < shards.length; i += perTransaction) {
      const chunk = shards.slice(i, i + perTransaction)
      await transaction(
        session,
        resolved,
        chunk.map((shard) => shardScript(resolved, shard)).join('\n'),
      )
      for (const shard of chunk) {
        done++
        options.onProgress?.({ done, total: shards.length, shard })
      }
    }
    session.release()
    return {
      sharding: resolved.sharding.toJSON(),
      shards,
      created: shards.filter((shard) => !existing.has(shard)),
      updated: shards.filter((shard) => existing.has(shard)),
      dialect: 'postgres',
    }
  } catch (error) {
    session.release(error instanceof Error ? error : undefined)
    throw translate(error)
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

/**
 * Refuses, before anything is created, to install functions that write a worker a live process
 * holds a lease on in this schema's lease registry: its in-process IDs and theirs could meet.
 */
async function refuseLeasedWorker(session: Session, o: ResolvedSqlOptions): Promise<void> {
  const table = `${quoteIdentifier('schema', o.schema)}.worker_leases`
  const [exists] = await session.query(`SELECT to_regclass($1) IS NOT NULL AS yes`, [table])
  if (!exists?.yes) return
  const rows = await session.query(
    `SELECT holder FROM ${table} WHERE worker = $1 AND holder IS NOT NULL AND expires_at > clock_timestamp()`,
    [o.worker],
  )
  if (rows.length > 0) {
    throw new ShardConflictError(
      `Worker ${o.worker} is leased to ${String(rows[0]!.holder)} (a LeasedSource) in this database's lease registry: next_id() installed with that worker would make the same IDs as that process. Install with another worker, or stop that process and free the worker (shardflake leases postgres --free ${o.worker}).`,
    )
  }
}

/**
 * The shards of the list already recorded here; refuses, before anything is created, one recorded
 * under another schema name or moved away from this database.
 */
async function readRecordedShards(
  session: Session,
  o: ResolvedSqlOptions,
  shards: number[],
): Promise<Set<number>> {
  const rows = await session.query(
    `SELECT s.shard, s.schema_name, to_jsonb(s) ->> 'retired_at' AS retired_at, to_jsonb(s) ->> 'moved_to' AS moved_to
     FROM ${quoteIdentifier('schema', o.schema)}.shards AS s WHERE s.shard = ANY($1::integer[])`,
    [shards],
  )
  const taken = rows.filter((row) => row.schema_name !== `${o.schemaPrefix}${String(row.shard)}`)
  if (taken.length > 0) {
    throw new ConfigurationError(
      `Logical shard(s) ${taken.map((row) => `${String(row.shard)} already installed in schema ${String(row.schema_name)}`).join(', ')}, not under prefix ${o.schemaPrefix}: one shard must have one source. Nothing was changed.`,
    )
  }
  const moved = rows.filter((row) => row.retired_at != null)
  if (moved.length > 0) {
    const first = moved[0]!
    throw new ShardMovedError(
      Number(first.shard),
      `Logical shard(s) ${formatShardList(moved.map((row) => Number(row.shard)))} moved from this database to another one${first.moved_to ? ` (${String(first.moved_to)})` : ''}: installing them here again would issue IDs the new home issues too. To bring a shard back, move it back (movePostgresShards). Nothing was changed.`,
    )
  }
  return new Set(rows.map((row) => Number(row.shard)))
}

/** Runs a script in one short transaction, serialised with other installers of the schema. @internal */
export async function transaction(session: Session, o: ResolvedSqlOptions, script: string) {
  await session.exec('BEGIN')
  try {
    // Serialises concurrent installers of the same common schema.
    await session.query(`SELECT pg_advisory_xact_lock(${o.lockKey}, -1)`)
    await session.exec(`SET LOCAL client_min_messages = warning;\n${script}`)
    await session.exec('COMMIT')
  } catch (error) {
    await session.exec('ROLLBACK').catch(() => undefined)
    throw error
  }
}

/** What a database records of its sharding; `logicalShards` is null for an installation from before it was recorded. @internal */
export interface InstalledSharding {
  layout: Layout
  logicalShards: number | null
  /** `database "name"`, for messages. */
  database: string
}

/**
 * Throws unless what the database records is `sharding`: the same layout and, when recorded, the
 * same `logicalShards`.
 * @throws ShardingMismatchError @internal
 */
export function checkInstalled(sharding: Sharding, installed: InstalledSharding): void {
  sharding.checkSame(
    {
      layout: installed.layout.toJSON(),
      logicalShards: installed.logicalShards ?? sharding.logicalShards,
    },
    installed.database,
  )
}

/** Every failure of an install or a move as a typed error. @internal */
export function translate(error: unknown, what = 'installPostgres'): ShardflakeError {
  return translatePostgresError(error, { what })
}

/**
 * The sharding recorded in a schema, in one query (`undefined` when nothing is installed there).
 * @internal
 */
export async function readShardingFrom(
  query: (text: string, params?: unknown[]) => Promise<Record<string, unknown>[]>,
  schema: string,
): Promise<InstalledSharding | undefined> {
  let rows: Record<string, unknown>[]
  try {
    rows = await query(
      `SELECT current_database() AS db, name, epoch_ms::text AS epoch, time_unit_ms, time_bits, shard_bits, worker_bits, sequence_bits, field_order, (description->>'allowSignBit')::boolean AS allow_sign_bit, to_jsonb(l) -> 'logical_shards' AS logical_shards FROM ${quoteIdentifier('schema', schema)}.layout AS l`,
    )
  } catch (error) {
    // 3F000 invalid_schema_name, 42P01 undefined_table: nothing installed in this schema.
    const own = error as { code?: unknown; cause?: { code?: unknown } } | undefined
    const code = own instanceof ShardflakeError ? own.cause?.code : own?.code
    if (code === '3F000' || code === '42P01') return undefined
    throw error
  }
  const row = rows[0]
  if (!row) return undefined
  const layout = defineLayout({
    name: String(row.name),
    epoch: Number(row.epoch),
    timeUnitMs: Number(row.time_unit_ms),
    timeBits: Number(row.time_bits),
    shardBits: Number(row.shard_bits),
    workerBits: Number(row.worker_bits),
    sequenceBits: Number(row.sequence_bits),
    order: String(row.field_order).split(',') as FieldName[],
    allowSignBit: row.allow_sign_bit === true,
  })
  const logical = row.logical_shards
  return {
    layout,
    logicalShards: logical == null ? null : Number(logical),
    database: `database ${JSON.stringify(String(row.db))}`,
  }
}

/**
 * The sharding recorded in a database by {@link installPostgres}, or `undefined` when nothing is
 * installed there.
 * @throws ConfigurationError when the installation records a layout but no `logicalShards`
 *   (installed before it was recorded: run `installPostgres` again with your sharding).
 * @example
 * ```ts
 * const installed = await readInstalledSharding(pool)
 * if (installed && !installed.equals(sharding)) throw new Error('another sharding')
 * ```
 */
export async function readInstalledSharding(
  client: SqlClient,
  options: { schema?: string } = {},
): Promise<Sharding | undefined> {
  checkClient('readInstalledSharding', client)
  checkKnownOptions('readInstalledSharding options', options, ['schema'])
  const session = await openSession(client).catch((error: unknown) => {
    throw translatePostgresError(error, { what: 'readInstalledSharding', connecting: true })
  })
  try {
    const installed = await readShardingFrom(session.query, options.schema ?? 'shardflake').catch(
      (error: unknown) => {
        throw translatePostgresError(error, { what: 'readInstalledSharding' })
      },
    )
    if (!installed) return undefined
    if (installed.logicalShards === null) {
      throw new ConfigurationError(
        `The ${installed.database} records layout ${JSON.stringify(installed.layout.name)} but no logicalShards: run installPostgres there again with your sharding to record it.`,
      )
    }
    return defineSharding({ layout: installed.layout, logicalShards: installed.logicalShards })
  } finally {
    session.release()
  }
}

/**
 * The logical shards recorded in a database by {@link installPostgres}, ascending: those it
 * serves, without the shards moved away from it ({@link movePostgresShards}) unless `includeRetired`.
 * @example
 * ```ts
 * const served = await readInstalledShards(pool) // [0, 1, ..., 999]
 * ```
 */
export async function readInstalledShards(
  client: SqlClient,
  options: { schema?: string; includeRetired?: boolean } = {},
): Promise<number[]> {
  checkClient('readInstalledShards', client)
  checkKnownOptions('readInstalledShards options', options, ['schema', 'includeRetired'])
  const schema = quoteIdentifier('schema', options.schema ?? 'shardflake')
  // to_jsonb: also reads metadata installed before the retired_at column existed.
  const where = options.includeRetired ? '' : ` WHERE to_jsonb(s) ->> 'retired_at' IS NULL`
  let rows: unknown[]
  try {
    ;({ rows } = await client.query(`SELECT shard FROM ${schema}.shards s${where} ORDER BY shard`))
  } catch (error) {
    // 3F000 invalid_schema_name, 42P01 undefined_table: nothing installed in this schema.
    const code = (error as { code?: unknown } | null)?.code
    if (code === '3F000' || code === '42P01') return []
    throw translatePostgresError(error, { what: 'readInstalledShards' })
  }
  return (rows as { shard: number }[]).map((row) => Number(row.shard))
}

/**
 * Makes `<schema>.next_id()` of a shard the DEFAULT of an existing table's column, so that even
 * a raw `INSERT` without the column gets an ID.
 * @throws InvalidIdentifierError for a table or column name that is not a plain identifier.
 * @example
 * ```ts
 * await setDefault(pool, { table: 'public.posts', shard: 5 })
 * await pool.query('INSERT INTO public.posts (body) VALUES ($1)', ['hi']) // id from shard 5
 * ```
 */
export async function setDefault(
  client: SqlClient,
  options: { table: string; shard: number; column?: string; schemaPrefix?: string },
): Promise<void> {
  checkClient('setDefault', client)
  checkKnownOptions('setDefault options', options, ['table', 'shard', 'column', 'schemaPrefix'])
  const sql = setDefaultSql(options)
  try {
    await client.query(sql)
  } catch (error) {
    throw translatePostgresError(error, { what: 'setDefault' })
  }
}
