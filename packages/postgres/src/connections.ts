import { ConfigurationError, OpenedPools, type ShardflakeError } from '@shardflake/core'
import {
  endedWhileLent,
  isPool,
  type PoolLike,
  type SqlClient,
  watchNewConnections,
} from './client'

/** A database of a {@link PostgresSource}: a client you own, or a URL the source opens a pool for. */
export type PostgresDatabase = SqlClient | string

/** One call's connection, for cancelling it on the server. @internal */
export interface Call {
  pid?: number
  pool?: PoolLike
  /** A cancel was sent for this call: its connection is destroyed, never reused. */
  cancelled?: boolean
}

/** Rows as the drivers return them. @internal */
export type Rows = readonly Record<string, unknown>[]

/** How a failure is translated, given what the connection did. @internal */
export type Translate = (
  error: unknown,
  extra?: { connecting?: boolean; connectionEnded?: boolean },
) => ShardflakeError

/**
 * The connections of a PostgresSource: the pools it opened from URLs (ended by {@link close}),
 * statements run on a connection of their own so that a give-up can cancel them on the server.
 * @internal
 */
export class Connections {
  private readonly opened = new OpenedPools<PoolLike>((url) =>
    import('pg').then(
      (pg) => {
        const created = new pg.default.Pool({ connectionString: url })
        // An idle connection the server closed: the next call fails and is translated.
        created.on('error', () => undefined)
        return created
      },
      (error: unknown) => {
        throw new ConfigurationError(
          'A database given as a URL needs the pg package (npm install pg).',
          { cause: error },
        )
      },
    ),
  )
  private readonly lazy = new Map<string, SqlClient>()
  private closed = false

  /** Runs a statement on a connection of its own, noting its server process for a cancel. */
  async run(
    database: SqlClient,
    sql: string,
    params: unknown[],
    call: Call,
    fail: Translate,
  ): Promise<Rows> {
    if (!isPool(database)) {
      try {
        return (await database.query(sql, params)).rows as Rows
      } catch (error) {
        throw fail(error)
      }
    }
    let connection: Awaited<ReturnType<PoolLike['connect']>>
    watchNewConnections(database)
    try {
      connection = await database.connect()
    } catch (error) {
      throw fail(error, { connecting: true })
    }
    // Ended by the server while pg-pool lent it (see watchNewConnections): the statement below
    // then fails as "not queryable", which is a lost connection.
    let ended = endedWhileLent.has(connection)
    const onEnd = () => {
      ended = true
    }
    connection.on?.('end', onEnd)
    connection.on?.('error', onEnd)
    call.pool = database
    if (typeof connection.processID === 'number') call.pid = connection.processID
    let broken = false
    try {
      return (await connection.query(sql, params)).rows as Rows
    } catch (error) {
      const translated = fail(error, { connectionEnded: ended })
      broken = ended || translated.code === 'CONNECTION_LOST'
      throw translated
    } finally {
      call.pid = undefined
      connection.off?.('end', onEnd)
      connection.off?.('error', onEnd)
      // A connection that broke is destroyed, not handed to the next caller; so is one a cancel
      // was sent to (it could otherwise land on the next caller's statement). While it closes, the
      // server may still end it (a restart, a terminated session): nobody waits on it any more,
      // so that late error is dropped instead of reaching the process as an 'error' event.
      const destroy = broken || call.cancelled === true
      if (destroy) connection.on?.('error', ignore)
      connection.release(destroy)
    }
  }

  /** The client for a shard map target: itself, or the pool opened for a URL. */
  async open(target: PostgresDatabase, what: string): Promise<SqlClient> {
    if (typeof target !== 'string') return target
    if (this.closed) throw new ConfigurationError(`${what}: this PostgresSource is closed.`)
    return this.opened.get(target)
  }

  /** A client that opens the URL's pool on first use, for `poolFor`. */
  client(url: string): SqlClient {
    let client = this.lazy.get(url)
    if (!client) {
      client = {
        query: async (text, params) => (await this.open(url, 'a query')).query(text, params),
      }
      this.lazy.set(url, client)
    }
    return client
  }

  /** Cancels the call's statement on the server, when it runs on a pool's connection. */
  cancel(call: Call): unknown {
    if (call.pool && call.pid) {
      call.cancelled = true
      return call.pool.query('SELECT pg_cancel_backend($1::integer)', [call.pid])
    }
    return undefined
  }

  /** Ends the pools opened from URLs. */
  async close(): Promise<void> {
    this.closed = true
    await this.opened.close()
  }
}

function ignore(): void {}
