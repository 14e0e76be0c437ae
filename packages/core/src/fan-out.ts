import { throwIfCancelled } from './deadline'
import {
  CancelledError,
  ConfigurationError,
  FanOutError,
  type FanOutFailure,
  InvalidArgumentError,
  ShardflakeError,
} from './errors'
import { type IdInput, toBigInt } from './id-value'
import { checkKnownOptions, describeValue } from './known-options'
import type { ShardList } from './shard-map'
import type { Sharding } from './sharding'
import { readInteger } from './source-options'

/**
 * The query a fan-out runs on one server: `handle` is that server's handle (a pool, a
 * DataSource, a PrismaClient), `shards` the logical shards it is asked about (restrict the query
 * to them), `signal` aborts when the caller cancels the fan-out. With `orderBy`, return the rows
 * already ordered by ID in the fan-out's `order`, and at most its `limit`.
 * @example
 * ```ts
 * import type { FanOutRun } from '@shardflake/core'
 * type Pool = { query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> } // a pg.Pool
 *
 * const countPosts: FanOutRun<Pool, { server: string; n: number }> = async (pool, server, shards) => {
 *   const { rows } = await pool.query(
 *     'SELECT $2::text AS server, count(*)::int AS n FROM posts WHERE (id >> 10) & 8191 = ANY($1)',
 *     [shards, server],
 *   )
 *   return rows as { server: string; n: number }[]
 * }
 * ```
 */
export type FanOutRun<H, R> = (
  handle: H,
  server: string,
  shards: readonly number[],
  signal: AbortSignal,
) => Promise<readonly R[]>

/**
 * What `ShardHomes.fanOut` takes besides the query.
 * @example
 * ```ts
 * import type { FanOutOptions } from '@shardflake/core'
 *
 * const newest20: FanOutOptions<{ id: string }> = { orderBy: (row) => row.id, order: 'desc', limit: 20 }
 * ```
 */
export interface FanOutOptions<R> {
  /**
   * Which logical shards to ask about: the query runs only on the servers holding them, each
   * told its own.
   * @default every shard in the directory, so every server holding one
   */
  readonly shards?: ShardList
  /** How many servers are queried at once. @default 4 */
  readonly concurrency?: number
  /**
   * The row's ID (a sharded ID of the application's layout, as a bigint or decimal string). The
   * per-server results, each already in `order`, are merged by it, and a row whose ID's shard is
   * not one the server was asked about is dropped (the old copy of a moved shard). Without it,
   * the rows are returned server after server, as they came.
   */
  readonly orderBy?: (row: R) => IdInput
  /** `'desc'`: newest first (IDs grow with time); `'asc'`: oldest first. Needs `orderBy`. @default 'desc' */
  readonly order?: 'desc' | 'asc'
  /** At most this many rows in all: the first ones in `order`. Needs `orderBy`. */
  readonly limit?: number
  /** Cancels the fan-out: servers not yet queried are not, and the call fails with `CancelledError`. */
  readonly signal?: AbortSignal
}

/** One server's part of a fan-out. @internal */
export interface FanOutStep<H> {
  readonly server: string
  readonly handle: H
  readonly shards: readonly number[]
}

const FAN_OUT_OPTIONS = ['shards', 'concurrency', 'orderBy', 'order', 'limit', 'signal']
/** The most servers queried at once. */
const MAX_CONCURRENCY = 1000

/** The checked options of a fan-out, before anything runs. @internal */
export interface CheckedFanOut<R> {
  readonly shards: ShardList | undefined
  readonly concurrency: number
  readonly orderBy: ((row: R) => IdInput) | undefined
  readonly descending: boolean
  readonly limit: number | undefined
  readonly signal: AbortSignal | undefined
}

/**
 * Checks a fan-out's query and options before anything runs.
 * @throws InvalidArgumentError
 * @internal
 */
export function checkFanOut<H, R>(run: FanOutRun<H, R>, options: unknown): CheckedFanOut<R> {
  if (typeof run !== 'function') {
    throw new InvalidArgumentError(
      `fanOut needs a function (handle, server, shards, signal) => Promise<rows>, got ${describeValue(run)}.`,
    )
  }
  checkKnownOptions('fanOut options', options, FAN_OUT_OPTIONS, { required: false })
  const given = (options ?? {}) as FanOutOptions<R>
  const concurrency = readInteger('concurrency', given.concurrency, 4, {
    min: 1,
    max: MAX_CONCURRENCY,
  })
  if (given.orderBy !== undefined && typeof given.orderBy !== 'function') {
    throw new InvalidArgumentError(
      `orderBy must be a function returning the row's ID, got ${describeValue(given.orderBy)}.`,
    )
  }
  if (given.order !== undefined && given.order !== 'desc' && given.order !== 'asc') {
    throw new InvalidArgumentError(
      `order must be 'desc' or 'asc', got ${describeValue(given.order)}.`,
    )
  }
  const limit =
    given.limit === undefined
      ? undefined
      : readInteger('limit', given.limit, 1, { min: 1, max: Number.MAX_SAFE_INTEGER })
  if (given.orderBy === undefined && (given.order !== undefined || limit !== undefined)) {
    throw new InvalidArgumentError(
      `fanOut ${limit !== undefined ? 'limit' : 'order'} needs orderBy (the row's ID): which rows come first is decided by their IDs.`,
    )
  }
  const signal = given.signal
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new InvalidArgumentError(`signal must be an AbortSignal, got ${describeValue(signal)}.`)
  }
  return {
    shards: given.shards,
    concurrency,
    orderBy: given.orderBy,
    descending: given.order !== 'asc',
    limit,
    signal,
  }
}

interface Answer<R> {
  readonly step: FanOutStep<unknown>
  /** The rows kept, in order, with their IDs. */
  readonly rows: readonly R[]
  readonly keys: readonly bigint[]
  /** How many rows the server returned, before any was dropped. */
  readonly returned: number
  /** The ID of the last row it returned (kept or not). */
  readonly lastKey: bigint | undefined
  readonly dropped: number
}

/**
 * Runs `run` on every step, at most `concurrency` at once, and merges the answers. A step that
 * throws is a failure: the others still run, and a {@link FanOutError} carries their merged rows
 * with the failures.
 * @internal
 */
export async function runFanOut<H, R>(
  sharding: Sharding,
  steps: readonly FanOutStep<H>[],
  run: FanOutRun<H, R>,
  options: CheckedFanOut<R>,
): Promise<R[]> {
  const { signal } = options
  throwIfCancelled(signal, 'the fan-out')
  const controller = new AbortController()
  const answers: (Answer<R> | undefined)[] = new Array(steps.length)
  const failures: (FanOutFailure | undefined)[] = new Array(steps.length)
  let next = 0
  const worker = async () => {
    while (next < steps.length && !controller.signal.aborted) {
      const index = next++
      const step = steps[index]!
      try {
        const rows = await run(step.handle, step.server, step.shards, controller.signal)
        answers[index] = readAnswer(sharding, step, rows, options)
      } catch (error) {
        failures[index] = { server: step.server, shards: step.shards, error }
      }
    }
  }
  const all = Promise.all(
    Array.from({ length: Math.min(options.concurrency, steps.length) }, worker),
  )
  await untilCancelled(all, signal, controller)
  const answered = answers.filter((answer): answer is Answer<R> => answer !== undefined)
  const failed = failures.filter((failure): failure is FanOutFailure => failure !== undefined)
  let rows: R[]
  if (options.orderBy) {
    const merged = mergeAnswers(answered, options.descending, options.limit)
    checkComplete(answered, merged, options)
    rows = merged.map((entry) => entry.row)
  } else {
    rows = answered.flatMap((answer) => answer.rows)
  }
  if (failed.length > 0) {
    const retryable = failed.every(
      ({ error }) => error instanceof ShardflakeError && error.retryable,
    )
    const list = failed
      .map(({ server, error }) => `${server}: ${error instanceof Error ? error.message : error}`)
      .join('; ')
    throw new FanOutError(
      `The fan-out failed on ${failed.length} of ${steps.length} servers (${list}). error.results holds the ${rows.length} rows of the ${answered.length} that answered, merged as asked; error.failures says which failed.`,
      rows,
      failed,
      { retryable },
    )
  }
  return rows
}

/** Waits for `work`, or fails at once with `CancelledError` when `signal` aborts. */
async function untilCancelled(
  work: Promise<unknown>,
  signal: AbortSignal | undefined,
  controller: AbortController,
): Promise<void> {
  if (!signal) {
    await work
    return
  }
  let onAbort: (() => void) | undefined
  try {
    await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        onAbort = () => {
          controller.abort(signal.reason)
          reject(
            new CancelledError('The fan-out was cancelled by the caller.', {
              cause: signal.reason,
            }),
          )
        }
        if (signal.aborted) onAbort()
        else signal.addEventListener('abort', onAbort, { once: true })
      }),
    ])
  } finally {
    if (onAbort) signal.removeEventListener('abort', onAbort)
  }
}

/** One server's rows, checked: an array, ordered by ID, rows of other shards dropped. */
function readAnswer<R>(
  sharding: Sharding,
  step: FanOutStep<unknown>,
  rows: unknown,
  options: CheckedFanOut<R>,
): Answer<R> {
  if (!Array.isArray(rows)) {
    throw new InvalidArgumentError(
      `The fan-out query for server ${step.server} returned ${describeValue(rows)}, not an array of rows.`,
    )
  }
  const { orderBy, descending } = options
  if (!orderBy) {
    return { step, rows, keys: [], returned: rows.length, lastKey: undefined, dropped: 0 }
  }
  const asked = new Set(step.shards)
  const kept: R[] = []
  const keys: bigint[] = []
  let previous: bigint | undefined
  for (const row of rows as R[]) {
    const key = toBigInt(orderBy(row), `The ID orderBy gave for a row of server ${step.server}`)
    if (previous !== undefined && (descending ? key > previous : key < previous)) {
      throw new InvalidArgumentError(
        `The rows of server ${step.server} are not in ${descending ? 'descending' : 'ascending'} order of their IDs (${previous} came before ${key}): order the query by ID ${descending ? 'DESC' : 'ASC'}, as the fan-out's order says.`,
      )
    }
    previous = key
    if (!asked.has(sharding.layout.shardOf(key))) continue
    kept.push(row)
    keys.push(key)
  }
  return {
    step,
    rows: kept,
    keys,
    returned: rows.length,
    lastKey: previous,
    dropped: rows.length - kept.length,
  }
}

/** A k-way merge of ordered answers, stopping at `limit`: nothing is sorted as a whole. */
function mergeAnswers<R>(
  answers: readonly Answer<R>[],
  descending: boolean,
  limit: number | undefined,
): { row: R; key: bigint }[] {
  const heads = answers.map(() => 0)
  const merged: { row: R; key: bigint }[] = []
  const max = limit ?? Number.POSITIVE_INFINITY
  while (merged.length < max) {
    let best = -1
    for (let i = 0; i < answers.length; i++) {
      const key = answers[i]!.keys[heads[i]!]
      if (key === undefined) continue
      const bestKey = best < 0 ? undefined : answers[best]!.keys[heads[best]!]!
      if (bestKey === undefined || (descending ? key > bestKey : key < bestKey)) best = i
    }
    if (best < 0) break
    const index = heads[best]!++
    merged.push({ row: answers[best]!.rows[index]!, key: answers[best]!.keys[index]! })
  }
  return merged
}

/**
 * Refuses a merge that may be missing rows: a server that dropped rows of other shards and
 * returned a full `limit` may hold more rows of its own shards past its last one, and the merge
 * needed them when it ended past that row.
 */
function checkComplete<R>(
  answers: readonly Answer<R>[],
  merged: readonly { key: bigint }[],
  options: CheckedFanOut<R>,
): void {
  const { limit, descending } = options
  if (limit === undefined) return
  for (const answer of answers) {
    if (answer.dropped === 0 || answer.returned < limit || answer.lastKey === undefined) continue
    const cut = merged[limit - 1]?.key
    const reachesPast =
      cut === undefined || (descending ? cut < answer.lastKey : cut > answer.lastKey)
    if (reachesPast) {
      throw new ConfigurationError(
        `Server ${answer.step.server} answered ${answer.returned} rows, as many as the limit, and ${answer.dropped} of them belong to shards it was not asked about (copies a move left behind, or a query that does not filter by shard): rows of its own shards beyond them may belong in the result. Restrict the query to the shards it is given (the third argument of the query function), or delete the old copies.`,
      )
    }
  }
}
