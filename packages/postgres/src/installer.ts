import {
  ConfigurationError,
  defineLayout,
  type FieldName,
  type Layout,
  LayoutMismatchError,
  readShardList,
  type ShardList,
} from '@shardflake/core'
import { openSession, type Session, type SqlClient } from './client'
import { quoteIdent } from './identifiers'
import {
  commonSql,
  type PostgresSqlOptions,
  type ResolvedSqlOptions,
  resolveSqlOptions,
  setDefaultSql,
  shardSql,
} from './sql'

/** Progress of {@link installPostgres}, reported after each shard. */
export interface InstallProgress {
  /** Shards installed so far. */
  done: number
  total: number
  /** The shard just installed. */
  shard: number
}

/** What {@link installPostgres} takes. */
export interface InstallOptions extends PostgresSqlOptions {
  /** The logical shards this database holds: a list, `{ from, to }` or `"0-99,200"`. */
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

/** What {@link installPostgres} did. */
export interface InstallResult {
  layout: Layout
  /** The shards installed or upgraded, ascending. */
  shards: number[]
  /** The common schema. */
  schema: string
}

/**
 * Installs (or upgrades, idempotently) the common objects and the `next_id()` of each logical
 * shard on one database. Records the layout and the shards in `<schema>.layout` and
 * `<schema>.shards`; refuses a different layout over the recorded one.
 *
 * Accepts a `pg.Pool` (one connection is used), a `pg.Client` or a PGlite instance.
 *
 * @throws LayoutMismatchError when the database already holds another layout.
 * @throws ConfigurationError when a shard is already installed under another schema name, or was
 *   moved away from this database ({@link moveShards}; SQLSTATE `SF005` from the raw script): its
 *   sequence there is fenced, and only moving it back lifts the fence.
 * @example
 * ```ts
 * import pg from 'pg'
 * import { instagram } from '@shardflake/core'
 * import { installPostgres } from '@shardflake/postgres'
 *
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL })
 * await installPostgres(pool, {
 *   layout: instagram,
 *   shards: '0-999',
 *   onProgress: ({ done, total }) => console.error(`${done}/${total}`),
 * })
 * ```
 */
export async function installPostgres(
  client: SqlClient,
  options: InstallOptions,
): Promise<InstallResult> {
  const resolved = resolveSqlOptions(options)
  const shards = readShardList(options.shards, resolved.layout)
  const perTransaction = options.shardsPerTransaction ?? 50
  const session = await openSession(client)
  try {
    const installed = await readLayoutFrom(session, resolved.schema)
    if (installed && !installed.equals(resolved.layout)) throw mismatch(resolved, installed)
    await transaction(session, resolved, commonSql(resolved))
    let done = 0
    for (let i = 0; i < shards.length; i += perTransaction) {
      const chunk = shards.slice(i, i + perTransaction)
      await transaction(
        session,
        resolved,
        chunk.map((shard) => shardSql(resolved, shard)).join('\n'),
      )
      for (const shard of chunk) {
        done++
        options.onProgress?.({ done, total: shards.length, shard })
      }
    }
    session.release()
    return { layout: resolved.layout, shards, schema: resolved.schema }
  } catch (error) {
    session.release(error instanceof Error ? error : undefined)
    throw translate(error)
  }
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

/** A layout in one line, for error messages. @internal */
export function describeLayout(layout: Layout): string {
  return `${JSON.stringify(layout.name)} (epoch ${new Date(layout.epoch).toISOString()}, time/shard/worker/sequence ${layout.timeBits}/${layout.shardBits}/${layout.workerBits}/${layout.sequenceBits} bits, ${layout.timeUnitMs} ms unit, order ${layout.order.join(',')})`
}

function mismatch(o: ResolvedSqlOptions, installed: Layout): LayoutMismatchError {
  return new LayoutMismatchError(
    `Schema ${JSON.stringify(o.schema)} already holds layout ${describeLayout(installed)}; refusing to install layout ${describeLayout(o.layout)} over it: IDs would lose their order and could repeat. Use the installed layout, or another schema (option schema) in another database.`,
  )
}

/** shardflake's SQLSTATEs as typed errors; anything else unchanged. @internal */
export function translate(error: unknown): unknown {
  const code = (error as { code?: unknown } | undefined)?.code
  const message = error instanceof Error ? error.message : String(error)
  if (code === 'SF002') return new LayoutMismatchError(message.replace(/^shardflake: /, ''))
  if (code === 'SF003' || code === 'SF005') {
    return new ConfigurationError(message.replace(/^shardflake: /, ''))
  }
  return error
}

/** The layout recorded in a schema, read on an open session. @internal */
export async function readLayoutFrom(
  session: Session,
  schema: string,
): Promise<Layout | undefined> {
  const [exists] = await session.query('SELECT to_regclass($1) IS NOT NULL AS present', [
    `${quoteIdent('schema', schema)}.layout`,
  ])
  if (!exists?.present) return undefined
  const [row] = await session.query(
    `SELECT name, epoch_ms::text AS epoch, time_unit_ms, time_bits, shard_bits, worker_bits, sequence_bits, field_order, (description->>'allowSignBit')::boolean AS allow_sign_bit FROM ${quoteIdent('schema', schema)}.layout`,
  )
  if (!row) return undefined
  return defineLayout({
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
}

/**
 * The layout recorded in a database by {@link installPostgres}, or `undefined` when none is.
 * @example
 * ```ts
 * const layout = await readInstalledLayout(pool)
 * if (layout && !layout.equals(instagram)) throw new Error('wrong layout')
 * ```
 */
export async function readInstalledLayout(
  client: SqlClient,
  options: { schema?: string } = {},
): Promise<Layout | undefined> {
  const session = await openSession(client)
  try {
    return await readLayoutFrom(session, options.schema ?? 'shardflake')
  } finally {
    session.release()
  }
}

/**
 * The logical shards recorded in a database by {@link installPostgres}, ascending: those it
 * serves, without the shards moved away from it ({@link moveShards}) unless `includeRetired`.
 * @example
 * ```ts
 * const served = await readInstalledShards(pool) // [0, 1, ..., 999]
 * ```
 */
export async function readInstalledShards(
  client: SqlClient,
  options: { schema?: string; includeRetired?: boolean } = {},
): Promise<number[]> {
  const schema = quoteIdent('schema', options.schema ?? 'shardflake')
  // to_jsonb: also reads metadata installed before the retired_at column existed.
  const where = options.includeRetired ? '' : ` WHERE to_jsonb(s) ->> 'retired_at' IS NULL`
  const result = await client.query(`SELECT shard FROM ${schema}.shards s${where} ORDER BY shard`)
  return (result.rows as { shard: number }[]).map((row) => Number(row.shard))
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
  await client.query(setDefaultSql(options))
}
