import {
  ConfigurationError,
  checkKnownOptions,
  type MovedTable,
  type RowRange,
  type RowStore,
  readDuration,
  type StoredRow,
  throwIfCancelled,
} from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { driverError, translateError } from './errors'
import { quoteIdentifier } from './identifiers'
import { checkPool } from './pool'
import { callServer } from './server-call'

/** What {@link mysqlRowStore} takes besides its pool. */
export interface MysqlRowStoreOptions {
  /**
   * How long one statement of the move (a page of rows read, written or deleted) may run before
   * it is killed on the server (`KILL QUERY`) and the move fails with `TimedOutError`
   * (retryable: run the move again, it resumes). A server that stopped answering then ends the
   * move instead of stalling it, and the application's writes to the moving shards.
   * @default 60000
   */
  readonly timeoutMs?: number
}

const OPTIONS = ['timeoutMs']
const DEFAULT_TIMEOUT_MS = 60_000

/** What the store learnt of a table. */
interface Shape {
  /** `` `db`.`table` `` or `` `table` ``. */
  readonly name: string
  readonly id: string
  /** The writable columns (generated ones left out), quoted, with whether they are binary. */
  readonly columns: readonly { readonly name: string; readonly binary: boolean }[]
}

/** Column types read and written as hex, never as text. */
const BINARY = new Set([
  'binary',
  'varbinary',
  'tinyblob',
  'blob',
  'mediumblob',
  'longblob',
  'bit',
  'geometry',
  'point',
  'linestring',
  'polygon',
  'multipoint',
  'multilinestring',
  'multipolygon',
  'geometrycollection',
])
/** ER_NO_REFERENCED_ROW_2: a child row whose parent is not there. */
const FOREIGN_KEY_VIOLATION = 1452

/**
 * The rows of one MySQL or MariaDB server, for `moveShardHomes` (`@shardflake/core`): rows are
 * read as a JSON array of their columns' text (`HEX()` for binary columns) in ID order (keyset
 * pages, selected by the shard bits of their ID, `(id >> shift) & mask`), written back with
 * `INSERT ... ON DUPLICATE KEY UPDATE` (a no-op update to copy, skipping a child whose parent is
 * not copied yet; every column to repair), and deleted by ID. Each table needs a primary key or
 * unique index on its ID column, and the same columns on every server.
 *
 * @example
 * ```ts
 * import { moveShardHomes, type Sharding } from '@shardflake/core'
 * import { createMysqlPool, MysqlShardDirectory, mysqlRowStore } from '@shardflake/mysql'
 * declare const sharding: Sharding
 *
 * const a = await createMysqlPool('mysql://root@db-a:3306/app')
 * const c = await createMysqlPool('mysql://root@db-c:3306/app')
 * await moveShardHomes({
 *   sharding,
 *   directory: new MysqlShardDirectory(a, { sharding }),
 *   servers: { a: mysqlRowStore(a), c: mysqlRowStore(c) },
 *   shards: '16-31',
 *   to: 'c',
 *   tables: ['posts', 'comments'],
 * })
 * ```
 * @throws InvalidArgumentError for something that is not a mysql2 promise pool.
 */
export function mysqlRowStore(pool: Pool, options: MysqlRowStoreOptions = {}): RowStore {
  checkPool('mysqlRowStore', pool)
  checkKnownOptions('mysqlRowStore options', options, OPTIONS)
  const timeoutMs = readDuration('timeoutMs', options.timeoutMs, DEFAULT_TIMEOUT_MS, { min: 1 })
  const shapes = new Map<string, Promise<Shape>>()

  /** Runs one statement within the deadline; a give-up kills it on the server. */
  async function run(
    what: string,
    sql: string,
    params: unknown[],
    signal?: AbortSignal,
  ): Promise<unknown> {
    try {
      return await callServer({ pool, timeoutMs, signal, what }, (query) => query(sql, params))
    } catch (error) {
      throw translateError(error, { what })
    }
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
    const parts = table.name.split('.')
    const [database, bare] = parts.length === 2 ? parts : [undefined, parts[0]!]
    const name = parts.map((part) => quoteIdentifier('table', part)).join('.')
    const idColumn = table.idColumn ?? 'id'
    const schema = database === undefined ? 'DATABASE()' : '?'
    const params = database === undefined ? [bare] : [database, bare]
    const columns = (await run(
      `reading the columns of table ${table.name}`,
      `SELECT COLUMN_NAME AS name, DATA_TYPE AS type,
              COALESCE(GENERATION_EXPRESSION, '') <> '' AS generated
         FROM information_schema.COLUMNS
        WHERE TABLE_SCHEMA = ${schema} AND TABLE_NAME = ?
        ORDER BY ORDINAL_POSITION`,
      params,
    )) as { name: string; type: string; generated: number | string }[]
    if (columns.length === 0) {
      throw new ConfigurationError(
        `Table ${table.name} does not exist on this MySQL/MariaDB server: create the sharded tables on every server before moving rows.`,
      )
    }
    if (!columns.some((column) => column.name === idColumn)) {
      throw new ConfigurationError(
        `Table ${table.name} has no column ${idColumn} on this MySQL/MariaDB server (its columns: ${columns.map((column) => column.name).join(', ')}): give the ID column as idColumn.`,
      )
    }
    const unique = (await run(
      `reading the indexes of table ${table.name}`,
      `SELECT INDEX_NAME FROM information_schema.STATISTICS
        WHERE TABLE_SCHEMA = ${schema} AND TABLE_NAME = ? AND NON_UNIQUE = 0
        GROUP BY INDEX_NAME HAVING COUNT(*) = 1 AND MAX(COLUMN_NAME) = ?`,
      [...params, idColumn],
    )) as unknown[]
    if (unique.length === 0) {
      throw new ConfigurationError(
        `Column ${idColumn} of table ${table.name} has no primary key or unique index of its own on this MySQL/MariaDB server: a move writes rows by their ID.`,
      )
    }
    return {
      name,
      id: quoteName(idColumn),
      columns: columns
        .filter((column) => Number(column.generated) !== 1)
        .map((column) => ({
          name: quoteName(column.name),
          binary: BINARY.has(column.type.toLowerCase()),
        })),
    }
  }

  function where(shape: Shape, range: RowRange, params: unknown[]): string {
    const shards = range.shards.map((shard) => Number(shard)).join(', ')
    let sql = `((${shape.id} >> ${Number(range.shift)}) & ${Number(range.mask)}) IN (${shards})`
    if (range.after !== undefined) {
      params.push(String(range.after))
      sql += ` AND ${shape.id} > CAST(? AS SIGNED)`
    }
    if (range.upTo !== undefined) {
      params.push(String(range.upTo))
      sql += ` AND ${shape.id} <= CAST(? AS SIGNED)`
    }
    return sql
  }

  const limitOf = (range: RowRange) =>
    range.limit === undefined ? '' : ` LIMIT ${Number(range.limit)}`

  return {
    async checkTable(table, signal) {
      throwIfCancelled(signal, 'the move')
      await shapeOf(table)
    },

    async readRows(table, range, signal) {
      throwIfCancelled(signal, 'the move')
      const shape = await shapeOf(table)
      const params: unknown[] = []
      const values = shape.columns
        .map((column) => (column.binary ? `HEX(${column.name})` : `CAST(${column.name} AS CHAR)`))
        .join(', ')
      const rows = (await run(
        `reading rows of table ${table.name}`,
        `SELECT CAST(${shape.id} AS CHAR) AS id, JSON_ARRAY(${values}) AS content FROM ${shape.name} WHERE ${where(shape, range, params)} ORDER BY ${shape.id}${limitOf(range)}`,
        params,
        signal,
      )) as { id: string; content: unknown }[]
      // mysql2 parses JSON results (MariaDB marks JSON_ARRAY as JSON), or hands back the text:
      // one canonical text either way.
      return rows.map(
        (row): StoredRow => ({
          id: BigInt(row.id),
          content: JSON.stringify(
            typeof row.content === 'string' ? JSON.parse(row.content) : row.content,
          ),
        }),
      )
    },

    async writeRows(table, rows, mode, signal) {
      throwIfCancelled(signal, 'the move')
      if (rows.length === 0) return
      const shape = await shapeOf(table)
      const tuple = `(${shape.columns.map((column) => (column.binary ? 'UNHEX(?)' : '?')).join(', ')})`
      const update =
        mode === 'missing'
          ? `${shape.id} = ${shape.id}`
          : shape.columns.map((column) => `${column.name} = VALUES(${column.name})`).join(', ')
      const statement = (count: number) =>
        `INSERT INTO ${shape.name} (${shape.columns.map((column) => column.name).join(', ')}) VALUES ${Array(count).fill(tuple).join(', ')} ON DUPLICATE KEY UPDATE ${update}`
      const valuesOf = (row: StoredRow) => JSON.parse(row.content) as unknown[]
      const what = `writing rows of table ${table.name}`
      try {
        await run(what, statement(rows.length), rows.flatMap(valuesOf), signal)
      } catch (error) {
        if (mode !== 'missing' || !isForeignKeyViolation(error)) throw error
        // A child whose parent arrived on the source after the parent table was copied: copy
        // the others; the switch copies it, once its parent is there.
        for (const row of rows) {
          try {
            await run(what, statement(1), valuesOf(row), signal)
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
        `DELETE FROM ${shape.name} WHERE ${shape.id} IN (${ids.map(() => 'CAST(? AS SIGNED)').join(', ')})`,
        ids.map(String),
        signal,
      )
    },

    async deleteRange(table, range, signal) {
      throwIfCancelled(signal, 'the move')
      const shape = await shapeOf(table)
      const params: unknown[] = []
      const result = (await run(
        `deleting rows of table ${table.name}`,
        `DELETE FROM ${shape.name} WHERE ${where(shape, range, params)} ORDER BY ${shape.id}${limitOf(range)}`,
        params,
        signal,
      )) as { affectedRows: number }
      return result.affectedRows
    },
  }
}

/** A translated failure whose cause is the server's foreign-key violation. */
function isForeignKeyViolation(error: unknown): boolean {
  return driverError((error as { cause?: unknown } | null)?.cause)?.errno === FOREIGN_KEY_VIOLATION
}

/** A column name read from the catalog, in backquotes (backquotes doubled). */
function quoteName(name: string): string {
  return `\`${name.replaceAll('`', '``')}\``
}
