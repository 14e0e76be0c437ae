import { connect, type Socket } from 'node:net'
import {
  ConfigurationError,
  describeValue,
  InvalidArgumentError,
  OpenedPools,
  OpenSockets,
} from '@shardflake/core'
import type { PoolConnection } from 'mysql2'
import type { Pool, PoolOptions } from 'mysql2/promise'

/**
 * The mysql2 options shardflake needs on every pool: BIGINT values come back as decimal strings,
 * never as JavaScript numbers (which lose precision above 2^53).
 */
export const BIG_NUMBER_OPTIONS = { supportBigNumbers: true, bigNumberStrings: true } as const

/**
 * Creates a mysql2 promise pool from a URL (`mysql://user:pass@host:3306/db`) or options, with
 * {@link BIG_NUMBER_OPTIONS} forced on. mysql2 is loaded only when this is called.
 *
 * @example
 * ```ts
 * const pool = await createMysqlPool(process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test')
 * ```
 * @throws InvalidArgumentError for a URL that does not parse.
 */
export async function createMysqlPool(config: string | PoolOptions): Promise<Pool> {
  const uri = typeof config === 'string' ? config : config?.uri
  if (uri !== undefined && (typeof uri !== 'string' || !URL.canParse(uri))) {
    throw new InvalidArgumentError(
      `createMysqlPool needs a connection URL like mysql://user:password@host:3306/database, got ${describeValue(uri)}.`,
    )
  }
  const mysql = await import('mysql2/promise')
  const createPool = mysql.createPool ?? mysql.default.createPool
  const options: PoolOptions = typeof config === 'string' ? { uri: config } : { ...config }
  return createPool({ ...options, ...BIG_NUMBER_OPTIONS })
}

/**
 * Throws unless `pool` is a mysql2 pool (promise API: `getConnection` and `query`). @internal
 * @throws InvalidArgumentError naming `what`.
 */
export function checkPool(what: string, pool: unknown): asserts pool is Pool {
  const candidate = pool as Partial<Pool> | null | undefined
  if (typeof candidate?.getConnection !== 'function' || typeof candidate.query !== 'function') {
    throw new InvalidArgumentError(
      `${what} needs a mysql2 pool (createMysqlPool(url), or mysql2/promise's createPool with supportBigNumbers and bigNumberStrings), got ${describeValue(pool)}.`,
    )
  }
}

interface PoolConfigShape {
  pool?: {
    config?: { connectionConfig?: { supportBigNumbers?: boolean; bigNumberStrings?: boolean } }
  }
}

/**
 * Throws unless the pool returns BIGINT as strings (`supportBigNumbers` and `bigNumberStrings`).
 * @throws ConfigurationError
 */
export function checkBigNumberConfig(pool: Pool, what: string): void {
  const config = (pool as PoolConfigShape).pool?.config?.connectionConfig
  if (!config) return
  if (!config.supportBigNumbers || !config.bigNumberStrings) {
    throw new ConfigurationError(
      `${what}: the mysql2 pool must be created with supportBigNumbers: true and bigNumberStrings: true, or BIGINT IDs pass through JavaScript numbers and lose precision above 2^53. Use createMysqlPool().`,
    )
  }
}

/** What mysql2 hands a `stream` factory: the connection's configuration. */
interface StreamFactoryOptions {
  config: {
    host?: string
    port?: number
    socketPath?: string
    enableKeepAlive?: boolean
    keepAliveInitialDelay?: number
  }
}

/**
 * The pools a source opens from URLs (`OpenedPools`): each with a connect deadline of the
 * source's `timeoutMs` (a server that accepts and never answers fails the connect instead of
 * holding a socket), and its sockets tracked, so that `close(timeoutMs)` ends the pool and
 * destroys the connections of one that has not ended in time (a stopped server would otherwise
 * leave them half-closed, and the process alive). @internal
 */
export function openedPools(timeoutMs: number): OpenedPools<Pool> {
  const sockets = new WeakMap<Pool, OpenSockets<Socket>>()
  return new OpenedPools<Pool>(
    async (url) => {
      const tracked = new OpenSockets<Socket>()
      const pool = await createMysqlPool({
        uri: url,
        connectTimeout: timeoutMs,
        // mysql2's own socket, made here so that it can be tracked.
        stream: ({ config }: StreamFactoryOptions) => {
          const socket = config.socketPath
            ? connect(config.socketPath)
            : connect(config.port ?? 3306, config.host ?? 'localhost')
          if (!config.socketPath) {
            socket.setNoDelay(true)
            if (config.enableKeepAlive !== false) {
              socket.once('connect', () =>
                socket.setKeepAlive(true, config.keepAliveInitialDelay ?? 0),
              )
            }
          }
          return tracked.add(socket)
        },
      })
      sockets.set(pool, tracked)
      return pool
    },
    {
      end: async (pool) => {
        await pool.end()
        await sockets.get(pool)?.closed()
      },
      destroy: (pool) => sockets.get(pool)?.destroy(),
    },
  )
}

/**
 * Closes a connection at once, its socket too: mysql2's `destroy()` only half-closes it, which
 * waits for a server that may never answer. @internal
 */
export function destroyConnection(connection: PoolConnection): void {
  connection.destroy()
  const stream: unknown = Reflect.get(connection, 'stream')
  if (typeof (stream as { destroy?: unknown } | null)?.destroy === 'function') {
    ;(stream as { destroy(): void }).destroy()
  }
}
