import {
  describeValue,
  type IdRequestContext,
  SourceUnavailableError,
  withDeadline,
} from '@shardflake/core'
import type { PoolConnection } from 'mysql2'
import type { Pool } from 'mysql2/promise'
import { connectFailure, driverError } from './errors'
import { destroyConnection } from './pool'

/** Runs one statement and returns its rows. @internal */
export type RunQuery = (
  sql: string,
  params: readonly unknown[],
) => Promise<readonly Record<string, unknown>[]>

/** What {@link callServer} takes. @internal */
export interface ServerCallOptions {
  /** The pool to take a connection from; not used when `query` is given. */
  readonly pool?: Pool
  /** The caller's connection (`IdRequestContext.query`): used instead of the pool. */
  readonly query?: IdRequestContext['query']
  readonly timeoutMs: number
  readonly signal?: AbortSignal | undefined
  /** Named in messages. */
  readonly what: string
  /**
   * On give-up: `'kill'` sends `KILL QUERY <thread id>` from another connection of the pool (the
   * statement stops on the server), `'destroy'` closes the connection (a server that does not
   * answer cannot be asked to kill anything); a function decides when the call gives up (a
   * source that is closing destroys).
   * @default 'kill'
   */
  readonly giveUp?: 'kill' | 'destroy' | (() => 'kill' | 'destroy')
}

/**
 * Runs `work` on one connection of the pool (or on the caller's connection) within `timeoutMs`
 * and the caller's `signal` (core `withDeadline`). On give-up the running statement is killed on
 * the server (`KILL QUERY`) or its connection closed; that connection is closed afterwards,
 * never handed back to the pool, so a late kill cannot reach another caller's statement.
 * @throws TimedOutError, CancelledError from the deadline; the driver's errors as they are.
 * @internal
 */
export function callServer<T>(
  options: ServerCallOptions,
  work: (run: RunQuery) => Promise<T>,
): Promise<T> {
  const { pool, query, timeoutMs } = options
  let connection: PoolConnection | undefined
  let gaveUp = false
  let broken = false
  let killing: Promise<unknown> | undefined
  const run: RunQuery = async (sql, params) => {
    // After a give-up nothing new is sent: IDs reserved now would only be dropped.
    if (gaveUp) throw new Error('The call was given up.')
    if (query) {
      const rows: unknown = await query(sql, params)
      if (!Array.isArray(rows)) {
        throw new SourceUnavailableError(
          `${options.what}: context.query returned ${describeValue(rows)} instead of the rows of the statement it was given. Nothing was issued.`,
        )
      }
      return rows
    }
    if (!connection) {
      const taken = await take(pool!).catch((error: unknown) => {
        throw connectFailure(error)
      })
      if (gaveUp) {
        taken.release()
        throw new Error('The call was given up.')
      }
      connection = taken
    }
    try {
      return await runOn(connection, sql, params)
    } catch (error) {
      if (driverError(error)?.fatal) broken = true
      throw error
    }
  }
  const task = async () => {
    try {
      return await work(run)
    } finally {
      const used = connection
      if (used) {
        if (gaveUp || broken) {
          if (killing) await settleWithin(killing, timeoutMs)
          used.destroy()
        } else {
          used.release()
        }
      }
    }
  }
  return withDeadline(task, {
    timeoutMs,
    signal: options.signal,
    what: options.what,
    onGiveUp: () => {
      gaveUp = true
      const used = connection
      if (!used || query) return
      const mode = typeof options.giveUp === 'function' ? options.giveUp() : options.giveUp
      if ((mode ?? 'kill') === 'kill' && pool) {
        killing = pool.query(`KILL QUERY ${Number(used.threadId)}`)
        killing.catch(() => destroyConnection(used))
      } else {
        destroyConnection(used)
      }
    },
  })
}

async function settleWithin(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined
  await Promise.race([
    promise.catch(() => undefined),
    new Promise((resolve) => {
      timer = setTimeout(resolve, ms)
    }),
  ])
  clearTimeout(timer)
}

/**
 * A connection of the pool through mysql2's callback API: the promise API wraps every connection
 * it hands out in a new object, which costs a single-ID call a measurable share of its time.
 */
function take(pool: Pool): Promise<PoolConnection> {
  return new Promise((resolve, reject) => {
    pool.pool.getConnection((error, connection) => (error ? reject(error) : resolve(connection)))
  })
}

function runOn(
  connection: PoolConnection,
  sql: string,
  params: readonly unknown[],
): Promise<readonly Record<string, unknown>[]> {
  return new Promise((resolve, reject) => {
    connection.query(sql, params as unknown[], (error, rows) =>
      error ? reject(error) : resolve(rows as Record<string, unknown>[]),
    )
  })
}
