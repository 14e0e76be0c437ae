/**
 * The dialect that `ShardedIdsPlugin.dialect()` returns: the application's dialect, whose
 * connections fill pending IDs (asynchronous sources) just before a query is sent, and give a
 * one-row INSERT its ID as `insertId`.
 */
import { type IdRequestContext, type IdSource, toSigned64 } from '@shardflake/core'
import {
  CompiledQuery as Compiled,
  type CompiledQuery,
  type DatabaseConnection,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type QueryResult,
  type RootOperationNode,
  type TransactionSettings,
} from 'kysely'
import { allocate } from './allocate'
import { PendingId } from './pending-id'

/** What the wrapped connections ask of the plugin. */
export interface QueryInspector {
  /**
   * The ID of the one new row of a plain INSERT into a declared table (no conflict clause, no
   * `ignore`, no `replace`): the value in its key column, or the ID a pending one was given.
   */
  insertIdOf(node: RootOperationNode, filled: ReadonlyMap<PendingId, bigint>): bigint | undefined
  /** Checks the declared tables against the database, once, when the driver starts. */
  checkTables(connection: DatabaseConnection, adapter: DialectAdapter): Promise<void>
}

/** `inner`, with the connections of its driver wrapped (see the module's comment). */
export function shardedDialect(inner: Dialect, inspector: QueryInspector): Dialect {
  return {
    createDriver: () =>
      new ShardedIdsDriver(inner.createDriver(), inner.createAdapter(), inspector),
    createQueryCompiler: () => inner.createQueryCompiler(),
    createAdapter: () => inner.createAdapter(),
    createIntrospector: (db) => inner.createIntrospector(db),
  }
}

type AbortOptions = Parameters<Driver['init']>[0]

/**
 * The inner driver, handing out wrapped connections and unwrapping them again for every driver
 * call that takes one (drivers keep private state on their own connection objects).
 */
class ShardedIdsDriver implements Driver {
  readonly #wrapped = new WeakMap<DatabaseConnection, DatabaseConnection>()
  readonly #inner = new WeakMap<DatabaseConnection, DatabaseConnection>()
  savepoint?: Driver['savepoint']
  rollbackToSavepoint?: Driver['rollbackToSavepoint']
  releaseSavepoint?: Driver['releaseSavepoint']

  constructor(
    private readonly driver: Driver,
    private readonly adapter: DialectAdapter,
    private readonly inspector: QueryInspector,
  ) {
    const { savepoint, rollbackToSavepoint, releaseSavepoint } = driver
    if (savepoint) {
      this.savepoint = (connection, name, compile) =>
        savepoint.call(driver, this.unwrap(connection), name, compile)
    }
    if (rollbackToSavepoint) {
      this.rollbackToSavepoint = (connection, name, compile) =>
        rollbackToSavepoint.call(driver, this.unwrap(connection), name, compile)
    }
    if (releaseSavepoint) {
      this.releaseSavepoint = (connection, name, compile) =>
        releaseSavepoint.call(driver, this.unwrap(connection), name, compile)
    }
  }

  async init(options?: AbortOptions): Promise<void> {
    await this.driver.init(options)
    const connection = await this.driver.acquireConnection(options)
    try {
      await this.inspector.checkTables(connection, this.adapter)
    } finally {
      await this.driver.releaseConnection(connection, options)
    }
  }

  async acquireConnection(options?: AbortOptions): Promise<DatabaseConnection> {
    const connection = await this.driver.acquireConnection(options)
    let wrapped = this.#wrapped.get(connection)
    if (!wrapped) {
      wrapped = wrapConnection(connection, this.inspector)
      this.#wrapped.set(connection, wrapped)
      this.#inner.set(wrapped, connection)
    }
    return wrapped
  }

  beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    return this.driver.beginTransaction(this.unwrap(connection), settings)
  }

  commitTransaction(connection: DatabaseConnection): Promise<void> {
    return this.driver.commitTransaction(this.unwrap(connection))
  }

  rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    return this.driver.rollbackTransaction(this.unwrap(connection))
  }

  releaseConnection(connection: DatabaseConnection, options?: AbortOptions): Promise<void> {
    return this.driver.releaseConnection(this.unwrap(connection), options)
  }

  destroy(options?: AbortOptions): Promise<void> {
    return this.driver.destroy(options)
  }

  private unwrap(connection: DatabaseConnection): DatabaseConnection {
    return this.#inner.get(connection) ?? connection
  }
}

function wrapConnection(inner: DatabaseConnection, inspector: QueryInspector): DatabaseConnection {
  const prepare = async (compiled: CompiledQuery, signal: AbortSignal | undefined) => {
    const pending = await fillPendingIds(compiled, contextOf(inner, signal))
    return pending ?? { compiled, filled: NOTHING_FILLED }
  }
  return {
    async executeQuery<R>(compiledQuery: CompiledQuery, options?: AbortOptions) {
      const { compiled, filled } = await prepare(compiledQuery, options?.signal)
      const result = await inner.executeQuery<R>(compiled, options)
      return withInsertId(result, inspector.insertIdOf(compiled.query, filled))
    },
    async *streamQuery<R>(compiledQuery: CompiledQuery, chunkSize: number, options?: AbortOptions) {
      const { compiled } = await prepare(compiledQuery, options?.signal)
      yield* inner.streamQuery<R>(compiled, chunkSize, options)
    },
    ...(inner.cancelQuery && { cancelQuery: (provider) => inner.cancelQuery!(provider) }),
    ...(inner.killSession && { killSession: (provider) => inner.killSession!(provider) }),
    ...(inner.collectSessionInfo && { collectSessionInfo: () => inner.collectSessionInfo!() }),
  }
}

const NOTHING_FILLED: ReadonlyMap<PendingId, bigint> = new Map()

/**
 * The query with every pending ID among its parameters replaced by an ID of its shard: one
 * `nextIds` call per shard (`nextId` for a shard that needs one, which a prefetching source serves
 * from its buffer); `undefined` when it has none. `filled` maps the pending ID to its ID when
 * there was one (the one row whose ID becomes `insertId`).
 */
async function fillPendingIds(
  compiled: CompiledQuery,
  context: IdRequestContext,
): Promise<{ compiled: CompiledQuery; filled: ReadonlyMap<PendingId, bigint> } | undefined> {
  const { parameters } = compiled
  let bySource: Map<IdSource, number[]> | undefined
  for (let i = 0; i < parameters.length; i++) {
    const value = parameters[i]
    if (!(value instanceof PendingId)) continue
    bySource ??= new Map()
    const source = PendingId.sourceOf(value)
    const positions = bySource.get(source)
    if (positions) positions.push(i)
    else bySource.set(source, [i])
  }
  if (!bySource) return undefined
  const values = [...parameters]
  await Promise.all(
    [...bySource].map(async ([source, positions]) => {
      const shards = positions.map((i) => (parameters[i] as PendingId).shard)
      const ids = await allocate(source, shards, context)
      positions.forEach((position, i) => {
        values[position] = toSigned64(ids[i]!)
      })
    }),
  )
  const single = bySource.size === 1 ? [...bySource.values()][0]! : []
  const filled: ReadonlyMap<PendingId, bigint> =
    single.length === 1
      ? new Map([[parameters[single[0]!] as PendingId, values[single[0]!] as bigint]])
      : NOTHING_FILLED
  return { compiled: Object.freeze({ ...compiled, parameters: Object.freeze(values) }), filled }
}

/**
 * The connection as a source context: a database source that may draw through the caller's
 * connection (`useContextQuery`) runs its statement there, before the INSERT. One connection
 * runs one query at a time, so statements for several shards go one after another.
 */
function contextOf(
  connection: DatabaseConnection,
  signal: AbortSignal | undefined,
): IdRequestContext {
  let previous: Promise<unknown> = Promise.resolve()
  return {
    ...(signal && { signal }),
    query: (sql, params) => {
      const next = previous.then(async () => {
        const { rows } = await connection.executeQuery<Record<string, unknown>>(
          Compiled.raw(sql, [...params]),
        )
        // A CALL comes back from mysql2 as [rows, status].
        const first: unknown = rows[0]
        return Array.isArray(first) ? (first as Record<string, unknown>[]) : rows
      })
      previous = next.catch(() => undefined)
      return next
    },
  }
}

/** The result with `insertId` set to the new row's ID, unless the driver set one or none was inserted. */
function withInsertId<R>(result: QueryResult<R>, id: bigint | undefined): QueryResult<R> {
  if (id === undefined || result.insertId !== undefined) return result
  if (result.numAffectedRows !== undefined && result.numAffectedRows !== 1n) return result
  return { ...result, insertId: id }
}
