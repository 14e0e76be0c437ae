import {
  ConfigurationError,
  checkKnownOptions,
  type MovedTable,
  type RowRange,
  type RowStore,
  readDuration,
  type StoredRow,
  throwIfCancelled,
  withDeadline,
} from '@shardflake/core'
import { checkClient, type SqlClient } from './client'
import { type Call, Connections } from './connections'
import { translatePostgresError } from './errors'
import { quoteQualified } from './names'

/** What {@link postgresRowStore} takes besides its client. */
export interface PostgresRowStoreOptions {
  /**
   * How long one statement of the move (a page of rows read, written or deleted) may run before
   * it is cancelled on the server and the move fails with `TimedOutError` (retryable: run the
   * move again, it resumes). A lock held by another session, or a server that stopped answering,
   * then ends the move instead of stalling it, and the application's writes to the moving shards.
   * @default 60000
   */
  readonly timeoutMs?: number
}

const OPTIONS = ['timeoutMs']
const DEFAULT_TIMEOUT_MS = 60_000

/** What the store learnt of a table: its quoted name, ID column and writable columns. */
interface Shape {
  readonly name: string
  readonly id: string
  /** Quoted columns written on insert (generated columns left out). */
  readonly columns: readonly string[]
}

/**
 * The rows of one PostgreSQL server, for `moveShardHomes` (`@shardflake/core`): rows are read as
 * `row_to_json` text in ID order (keyset pages, selected by the shard bits of their ID,
 * `(id >> shift) & mask`), written back with `json_populate_recordset` (`ON CONFLICT DO NOTHING`
 * to copy, `ON CONFLICT (id) DO UPDATE` to repair), and deleted by ID. Each table needs a
 * primary key or unique index on its ID column, and the same columns on every server.
 *
 * @example
 * ```ts
 * import { moveShardHomes, type Sharding } from '@shardflake/core'
 * import { PostgresShardDirectory, postgresRowStore } from '@shardflake/postgres'
 * import pg from 'pg'
 * declare const sharding: Sharding
 *
 * const a = new pg.Pool({ connectionString: process.env.SERVER_A_URL })
 * const c = new pg.Pool({ connectionString: process.env.SERVER_C_URL })
 * await moveShardHomes({
 *   sharding,
 *   directory: new PostgresShardDirectory(a, { sharding }),
 *   servers: { a: postgresRowStore(a), c: postgresRowStore(c) },
 *   shards: '16-31',
 *   to: 'c',
 *   tables: ['posts', 'comments'],
 * })
 * ```
 * @throws InvalidArgumentError for a client that cannot run queries, or a bad `timeoutMs`.
 */
export function postgresRowStore(
  client: SqlClient,
  options: PostgresRowStoreOptions = {},
): RowStore {
  checkClient('postgresRowStore', client)
  checkKnownOptions('postgresRowStore options', options, OPTIONS)
  const timeoutMs = readDuration('timeoutMs', options.timeoutMs, DEFAULT_TIMEOUT_MS, { min: 1 })
  const connections = new Connections(timeoutMs)
  const shapes = new Map<string, Promise<Shape>>()

  /**
   * Runs one statement within the deadline, on a connection of its own when `client` is a pool,
   * so that a give-up (the deadline, or the move's signal) cancels it on the server.
   */
  function statement(
    what: string,
    sql: string,
    params: unknown[],
    signal?: AbortSignal,
  ): Promise<readonly Record<string, unknown>[]> {
    const call: Call = {}
    return withDeadline(
      () =>
        connections.run(client, sql, params, call, (error, extra) =>
          translatePostgresError(error, { what, ...extra }),
        ),
      { timeoutMs, signal, what, onGiveUp: () => connections.cancel(call) },
    )
  }

  async function run(
    what: string,
    sql: string,
    params: unknown[],
    signal?: AbortSignal,
  ): Promise<unknown[]> {
    return [...(await statement(what, sql, params, signal))]
  }

  function shapeOf(table: MovedTable): Promise<Shape> {
    const key = `${table.name}\u0000${table.idColumn ?? 'id'}`
    let shape = shapes.get(key)
    if (!shape) {
      shape = describe(table)
      shapes.set(key, shape)
      shape.catch(() => shapes.delete(key))
    }
    return shape
  }

  async function describe(table: MovedTable): Promise<Shape> {
    const name = quoteQualified('table', table.name)
    const idColumn = table.idColumn ?? 'id'
    const rows = (await run(
      `reading the columns of table ${table.name}`,
      `SELECT a.attname AS name, a.attgenerated <> '' AS generated,
              EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisunique
                        AND i.indnkeyatts = 1 AND i.indkey[0] = a.attnum AND i.indpred IS NULL) AS unique
         FROM pg_attribute a
        WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
        ORDER BY a.attnum`,
      [name],
    )) as { name: string; generated: boolean; unique: boolean }[]
    if (rows.length === 0) {
      throw new ConfigurationError(
        `Table ${table.name} does not exist on this PostgreSQL server: create the sharded tables on every server before moving rows.`,
      )
    }
    const id = rows.find((column) => column.name === idColumn)
    if (!id) {
      throw new ConfigurationError(
        `Table ${table.name} has no column ${idColumn} on this PostgreSQL server (its columns: ${rows.map((column) => column.name).join(', ')}): give the ID column as idColumn.`,
      )
    }
    if (!id.unique) {
      throw new ConfigurationError(
        `Column ${idColumn} of table ${table.name} has no primary key or unique index of its own on this PostgreSQL server: a move writes rows by their ID.`,
      )
    }
    return {
      name,
      id: quoteName(idColumn),
      columns: rows.filter((column) => !column.generated).map((column) => quoteName(column.name)),
    }
  }

  function where(shape: Shape, range: RowRange, params: unknown[]): string {
    const shift = Number(range.shift)
    const mask = Number(range.mask)
    params.push(range.shards)
    let sql = `((t.${shape.id} >> ${shift}) & ${mask}) = ANY($${params.length}::int[])`
    if (range.after !== undefined) {
      params.push(String(range.after))
      sql += ` AND t.${shape.id} > $${params.length}::bigint`
    }
    if (range.upTo !== undefined) {
      params.push(String(range.upTo))
      sql += ` AND t.${shape.id} <= $${params.length}::bigint`
    }
    return sql
  }

  function limitOf(range: RowRange, params: unknown[]): string {
    if (range.limit === undefined) return ''
    params.push(range.limit)
    return ` LIMIT $${params.length}::int`
  }

  return {
    async checkTable(table, signal) {
      throwIfCancelled(signal, 'the move')
      await shapeOf(table)
    },

    async readRows(table, range, signal) {
      throwIfCancelled(signal, 'the move')
      const shape = await shapeOf(table)
      const params: unknown[] = []
      const sql = `SELECT t.${shape.id}::text AS id, row_to_json(t)::text AS content FROM ${shape.name} AS t WHERE ${where(shape, range, params)} ORDER BY t.${shape.id}${limitOf(range, params)}`
      const rows = (await run(`reading rows of table ${table.name}`, sql, params, signal)) as {
        id: string
        content: string
      }[]
      return rows.map((row): StoredRow => ({ id: BigInt(row.id), content: row.content }))
    },

    async writeRows(table, rows, mode, signal) {
      throwIfCancelled(signal, 'the move')
      if (rows.length === 0) return
      const shape = await shapeOf(table)
      const columns = shape.columns.join(', ')
      const others = shape.columns.filter((column) => column !== shape.id)
      const conflict =
        mode === 'missing' || others.length === 0
          ? 'ON CONFLICT DO NOTHING'
          : `ON CONFLICT (${shape.id}) DO UPDATE SET ${others.map((column) => `${column} = EXCLUDED.${column}`).join(', ')}`
      const insert = `INSERT INTO ${shape.name} AS t (${columns}) SELECT ${columns} FROM json_populate_recordset(NULL::${shape.name}, $1::json) ${conflict}`
      const what = `writing rows of table ${table.name}`
      try {
        await statement(what, insert, [`[${rows.map((row) => row.content).join(',')}]`], signal)
      } catch (error) {
        if (mode !== 'missing' || !isForeignKeyViolation(error)) throw error
        // A child whose parent arrived on the source after the parent table was copied: copy
        // the others; the switch copies it, once its parent is there.
        for (const row of rows) {
          try {
            await statement(what, insert, [`[${row.content}]`], signal)
          } catch (each) {
            if (!isForeignKeyViolation(each)) throw each
          }
        }
      }
    },

    async deleteRows(table, ids, signal) {
      throwIfCancelled(signal, 'the move')
      if (ids.length === 0) return
      const shape = await shapeOf(table)
      await run(
        `deleting rows of table ${table.name}`,
        `DELETE FROM ${shape.name} AS t WHERE t.${shape.id} = ANY($1::bigint[])`,
        [ids.map(String)],
        signal,
      )
    },

    async deleteRange(table, range, signal) {
      throwIfCancelled(signal, 'the move')
      const shape = await shapeOf(table)
      const params: unknown[] = []
      const pick = `SELECT t.${shape.id} FROM ${shape.name} AS t WHERE ${where(shape, range, params)}${limitOf(range, params)}`
      const rows = (await run(
        `deleting rows of table ${table.name}`,
        `WITH gone AS (DELETE FROM ${shape.name} WHERE ${shape.id} IN (${pick}) RETURNING 1) SELECT count(*)::int AS count FROM gone`,
        params,
        signal,
      )) as { count: number }[]
      return rows[0]?.count ?? 0
    },
  }
}

const FOREIGN_KEY_VIOLATION = '23503'

/** A translated failure whose cause is PostgreSQL's foreign-key violation. */
function isForeignKeyViolation(error: unknown): boolean {
  const cause = (error as { cause?: unknown } | null)?.cause
  return (cause as { code?: unknown } | null)?.code === FOREIGN_KEY_VIOLATION
}

/** A column name read from the catalog, quoted (quotes doubled). */
function quoteName(name: string): string {
  return `"${name.replaceAll('"', '""')}"`
}
