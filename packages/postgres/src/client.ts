import { describeValue, InvalidArgumentError } from '@shardflake/core'

/**
 * Anything that runs one SQL statement with `$1` parameters and returns its rows: a `pg.Pool`, a
 * `pg.Client`, a pool client, or a PGlite instance (`@electric-sql/pglite`) — all of them fit as
 * they are.
 *
 * @example
 * ```ts
 * import pg from 'pg'
 * import { PGlite } from '@electric-sql/pglite'
 *
 * const server: SqlClient = new pg.Pool({ connectionString: process.env.DATABASE_URL })
 * const embedded: SqlClient = new PGlite()
 * ```
 */
export interface SqlClient {
  query(text: string, params?: unknown[]): Promise<{ rows: unknown[] }>
}

/**
 * Throws unless `client` can run statements (it has `query`): a `pg.Pool`, a `pg.Client`, a
 * PGlite instance. @internal
 * @throws InvalidArgumentError naming `what`.
 */
export function checkClient(what: string, client: unknown): asserts client is SqlClient {
  if (typeof (client as Partial<SqlClient> | null | undefined)?.query !== 'function') {
    throw new InvalidArgumentError(
      `${what} needs a database client: a pg.Pool, a pg.Client or a PGlite instance (anything with query(sql, params)), got ${describeValue(client)}.`,
    )
  }
}

/** A PGlite-like client: it runs multi-statement scripts with `exec`. */
interface ScriptClient extends SqlClient {
  exec(script: string): Promise<unknown>
}

/** A connection lent by a pool: node-postgres' `PoolClient`. @internal */
export interface PooledConnection extends SqlClient {
  release(error?: Error | boolean): void
  /** The server process of the connection (node-postgres sets it once connected). */
  readonly processID?: number | null
  on?(event: 'end' | 'error', listener: () => void): unknown
  off?(event: 'end' | 'error', listener: () => void): unknown
}

/** A pg.Pool-like client: `connect()` lends a client that must be released. @internal */
export interface PoolLike extends SqlClient {
  connect(): Promise<PooledConnection>
  readonly idleCount: number
  end?(): Promise<void>
  /** node-postgres' pool emits `'connect'` with each new connection, before lending it. */
  on?(event: 'connect', listener: (connection: PooledConnection) => void): unknown
}

/** One connection for a run of statements (a transaction), and how to give it back. @internal */
export interface Session {
  query(text: string, params?: unknown[]): Promise<Record<string, unknown>[]>
  /** Runs a script of several statements (no parameters). */
  exec(script: string): Promise<void>
  release(error?: Error): void
}

function hasExec(client: SqlClient): client is ScriptClient {
  return typeof (client as Partial<ScriptClient>).exec === 'function'
}

/** True for a pg.Pool-like client. @internal */
export function isPool(client: SqlClient): client is PoolLike {
  return (
    typeof (client as Partial<PoolLike>).connect === 'function' &&
    typeof (client as Partial<PoolLike>).idleCount === 'number'
  )
}

/** Takes one connection: a client from a pool, or the client itself. @internal */
export async function openSession(client: SqlClient): Promise<Session> {
  if (isPool(client)) watchNewConnections(client)
  const target = isPool(client) ? await client.connect() : client
  const release = (error?: Error) => {
    if (target !== client && 'release' in target && typeof target.release === 'function') {
      target.release(error)
    }
  }
  return {
    async query(text, params) {
      const result = await target.query(text, params ?? [])
      return result.rows as Record<string, unknown>[]
    },
    async exec(script) {
      // PGlite runs scripts with exec(); node-postgres does with query() and no parameters.
      if (hasExec(target)) await target.exec(script)
      else await target.query(script)
    },
    release,
  }
}

const watchedPools = new WeakSet<PoolLike>()
/** Connections that emitted an error while pg-pool lent them (see watchNewConnections). @internal */
export const endedWhileLent = new WeakSet<object>()

/**
 * Gives every new connection of the pool an 'error' listener for its whole life. pg-pool lends a
 * new connection from inside the socket read that completed its startup; when the server ended
 * the session in the same read (a terminated backend, a shutdown), the error is emitted after
 * the pool removed its own listener and before the borrower can add one, and an 'error' event
 * without a listener ends the process. The listener notes the connection as ended instead. A pool
 * you pass in gets this listener too; your own listeners and the pool's 'error' event are
 * unchanged. @internal
 */
export function watchNewConnections(pool: PoolLike): void {
  if (watchedPools.has(pool)) return
  watchedPools.add(pool)
  pool.on?.('connect', (connection) => {
    connection.on?.('error', () => endedWhileLent.add(connection))
  })
}
