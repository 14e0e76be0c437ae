import { Socket } from 'node:net'
import {
  ConfigurationError,
  OpenedPools,
  OpenSockets,
  type ShardflakeError,
} from '@shardflake/core'
import {
  endedWhileLent,
  isPool,
  type PooledConnection,
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
  /** The connection the call holds while its statement runs. */
  connection?: PooledConnection
  /** The source closed while the call ran: its connection was given back broken, at once. */
  abandoned?: boolean
}

/** Rows as the drivers return them. @internal */
export type Rows = readonly Record<string, unknown>[]

/** How a failure is translated, given what the connection did. @internal */
export type Translate = (
  error: unknown,
  extra?: { connecting?: boolean; connectionEnded?: boolean },
) => ShardflakeError

/** A pool the source opened from a URL. */
interface OpenedPool extends PoolLike {
  end(): Promise<void>
}

/**
 * The connections of a PostgresSource: the pools it opened from URLs (ended by {@link close}),
 * statements run on a connection of their own so that a give-up can cancel them on the server.
 * @internal
 */
export class Connections {
  /** The sockets of each pool opened from a URL. */
  private readonly sockets = new WeakMap<object, OpenSockets<Socket>>()
  private readonly opened = new OpenedPools<OpenedPool>(
    (url) =>
      import('pg').then(
        (pg) => {
          const sockets = new OpenSockets<Socket>()
          const created = new pg.default.Pool({
            connectionString: url,
            // A server that accepts the connection and never answers (stopped, or not PostgreSQL)
            // fails the connect instead of holding a socket and a pool slot forever.
            connectionTimeoutMillis: this.timeoutMs,
            stream: () => sockets.add(new Socket()),
          })
          // An idle connection the server closed: the next call fails and is translated.
          created.on('error', () => undefined)
          this.sockets.set(created, sockets)
          return created
        },
        (error: unknown) => {
          throw new ConfigurationError(
            'A database given as a URL needs the pg package (npm install pg).',
            { cause: error },
          )
        },
      ),
    {
      // Ended once its connections have said goodbye and their sockets closed.
      end: async (pool) => {
        await pool.end()
        await this.sockets.get(pool)?.closed()
      },
      destroy: (pool) => this.sockets.get(pool)?.destroy(),
    },
  )
  private readonly lazy = new Map<string, SqlClient>()
  /** The calls running on a pool's connection, given back broken when the source closes. */
  private readonly running = new Set<Call>()
  private closed = false

  /** @param timeoutMs The source's timeoutMs: the connect deadline of its pools, and close's bound. */
  constructor(private readonly timeoutMs: number) {}

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
    let connection: PooledConnection
    watchNewConnections(database)
    this.running.add(call)
    try {
      connection = await database.connect()
    } catch (error) {
      this.running.delete(call)
      throw fail(error, { connecting: true })
    }
    if (call.abandoned) {
      // The source closed while the connection opened: give it back unused.
      this.running.delete(call)
      connection.release()
      throw new ConfigurationError('This PostgresSource is closed.')
    }
    call.connection = connection
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
      this.running.delete(call)
      call.pid = undefined
      call.connection = undefined
      connection.off?.('end', onEnd)
      connection.off?.('error', onEnd)
      // A connection that broke is destroyed, not handed to the next caller; so is one a cancel
      // was sent to (it could otherwise land on the next caller's statement). While it closes, the
      // server may still end it (a restart, a terminated session): nobody waits on it any more,
      // so that late error is dropped instead of reaching the process as an 'error' event.
      // An abandoned one was given back already.
      if (!call.abandoned) {
        const destroy = broken || call.cancelled === true
        if (destroy) connection.on?.('error', ignore)
        connection.release(destroy)
      }
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

  /**
   * Cancels the call's statement on the server, when it runs on a pool's connection. The cancel
   * goes over a connection of its own, outside the pool: every connection of the pool may be
   * held by statements waiting like this one (a pool of one always is), and a cancel queued
   * behind them would never run.
   */
  cancel(call: Call): unknown {
    if (call.pool && call.pid) {
      call.cancelled = true
      return this.cancelBackend(call.pool, call.connection, call.pid)
    }
    return undefined
  }

  private async cancelBackend(
    pool: PoolLike,
    connection: PooledConnection | undefined,
    pid: number,
  ): Promise<void> {
    const sql = 'SELECT pg_cancel_backend($1::integer)'
    // node-postgres: the pool's connections are instances of its Client class, made from the
    // pool's options; one more of them, outside the pool, reaches the same server.
    const Client = connection?.constructor as (new (options: object) => OutOfPoolClient) | undefined
    const options = (pool as { options?: unknown }).options
    if (typeof Client !== 'function' || typeof options !== 'object' || options === null) {
      await pool.query(sql, [pid])
      return
    }
    const client = new Client({ ...options, connectionTimeoutMillis: this.timeoutMs })
    client.on?.('error', ignore)
    try {
      await client.connect()
      await client.query(sql, [pid])
    } finally {
      await client.end().catch(ignore)
    }
  }

  /**
   * Gives back broken, at once, the connections of the calls still running (their statements
   * stop waiting; the pool closes those connections), then ends the pools opened from URLs,
   * destroying the connections of a pool that has not ended within timeoutMs.
   */
  async close(): Promise<void> {
    this.closed = true
    for (const call of [...this.running]) {
      call.abandoned = true
      const connection = call.connection
      if (connection) {
        connection.on?.('error', ignore)
        connection.release(true)
      }
    }
    this.running.clear()
    await this.opened.close(this.timeoutMs)
  }
}

function ignore(): void {}

/** A node-postgres Client of its own, made like the pool's connections. */
interface OutOfPoolClient extends SqlClient {
  connect(): Promise<void>
  end(): Promise<void>
  on?(event: 'error', listener: () => void): unknown
}
