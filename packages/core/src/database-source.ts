import {
  CancelledError,
  ConfigurationError,
  InvalidArgumentError,
  ShardOutOfRangeError,
} from './errors'
import { checkSignal } from './id-source'
import { describeValue } from './known-options'
import type { PrefetchOptions } from './prefetch-source'
import { readShardList, type ShardList, ShardMap, type ShardRange } from './shard-map'
import type { Sharding } from './sharding'

/**
 * Where a database source's logical shards live: one database (a pool you own, or a URL the
 * source opens), ranges of logical shards to databases, or a {@link ShardMap}.
 */
export type SourceDatabases<T> = T | readonly ShardRange<T>[] | ShardMap<T>

/** The options every database source (`PostgresSource`, `MysqlSource`) shares. */
export interface DatabaseSourceOptions<T> {
  /**
   * The application's sharding (`defineSharding({ layout, logicalShards })`), the one the
   * databases were installed with: the source compares it with what each database records.
   * Required: there is no default `logicalShards`.
   */
  sharding: Sharding
  /**
   * Where the logical shards live: one database (a pool or a URL) for `shards`, ranges of
   * logical shards to databases, or a `ShardMap`. Pools you pass stay open on `close()`; pools
   * the source opened from URLs are ended.
   */
  databases: SourceDatabases<T>
  /** With one database in `databases`: the logical shards it serves. @default 'all' */
  shards?: ShardList
  /** The prefix the shards were installed with. @default 'shard_' */
  schemaPrefix?: string
  /**
   * The longest one call waits for its database, in ms. Past it the call fails with
   * `TimedOutError` and its statement is cancelled on the server.
   * @default 2000 (SOURCE_DEFAULTS.timeoutMs)
   */
  timeoutMs?: number
  /**
   * Serve single IDs and small batches from a per-shard buffer (`PrefetchBuffers`): a call the
   * buffer cannot serve takes what is left and reserves `size` more in one round trip. An ID's
   * embedded time is when it was made, up to `maxAgeMs` before the row is inserted; unused IDs
   * are dropped after `maxAgeMs` or on `close()` (gaps, never repeats).
   * @default undefined (no buffer: every call is one round trip)
   */
  prefetch?: PrefetchOptions
  /**
   * Draw through the caller's connection (`context.query`, e.g. the ORM's transaction) when one
   * is given, instead of the source's pool; a function decides per shard. Only correct when that
   * connection reaches the database holding the shard, so off unless you say so. Such calls skip
   * the prefetch buffer: they draw exactly what they return, on that connection.
   * @default false
   */
  useContextQuery?: boolean | ((shard: number) => boolean)
}

/**
 * The shard map of a source's `databases` (and `shards`, with one database).
 * @throws ShardingMismatchError for a ShardMap of another sharding.
 * @throws ConfigurationError for an empty `shards` list, or no `databases`.
 * @throws InvalidArgumentError for a list of `databases` holding something else than ranges.
 */
export function toShardMap<T>(
  sharding: Sharding,
  databases: SourceDatabases<T>,
  shards: ShardList | undefined,
): ShardMap<T> {
  if (databases instanceof ShardMap) {
    sharding.checkSame(databases.sharding, 'The shard map given as databases')
    return databases
  }
  if (Array.isArray(databases)) {
    databases.forEach((range: unknown, index) => {
      if (typeof range !== 'object' || range === null || Array.isArray(range)) {
        throw new InvalidArgumentError(
          `databases[${index}] must be a range of logical shards { from, to, target }, got ${describeValue(range)}.`,
        )
      }
    })
    return new ShardMap(sharding, databases as ShardRange<T>[])
  }
  if (typeof databases !== 'string' && (typeof databases !== 'object' || databases === null)) {
    throw new ConfigurationError(
      'A database source needs databases: a pool or URL (with shards), ranges of logical shards to pools or URLs, or a ShardMap.',
    )
  }
  const target = databases as T
  if (shards === undefined || shards === 'all') return ShardMap.single(sharding, target)
  if (typeof shards === 'object' && shards !== null && !Array.isArray(shards)) {
    const { from, to } = shards as { from: number; to: number }
    return new ShardMap(sharding, [{ from, to, target }])
  }
  const ranges: ShardRange<T>[] = []
  for (const shard of readShardList(shards, sharding)) {
    const last = ranges[ranges.length - 1]
    if (last && last.to === shard - 1) last.to = shard
    else ranges.push({ from: shard, to: shard, target })
  }
  if (ranges.length === 0) throw new ConfigurationError('shards must not be an empty list.')
  return new ShardMap(sharding, ranges)
}

/**
 * Throws unless the shard is one of the logical shards and in the source's shard map.
 * @throws ShardOutOfRangeError
 */
export function checkServedShard(shardMap: ShardMap<unknown>, shard: number): void {
  shardMap.sharding.checkShard(shard)
  if (!shardMap.has(shard)) {
    throw new ShardOutOfRangeError(
      shard,
      `Logical shard ${shard} is not in this source's shard map.`,
    )
  }
}

/**
 * The `useContextQuery` option as a rule per shard.
 * @throws InvalidArgumentError for anything but a boolean, a function or undefined.
 */
export function contextQueryRule(
  option: boolean | ((shard: number) => boolean) | undefined,
): (shard: number) => boolean {
  const use = option ?? false
  if (typeof use === 'function') {
    return (shard) => {
      try {
        return use(shard) === true
      } catch (error) {
        throw new ConfigurationError(
          `useContextQuery threw for logical shard ${shard}: ${error instanceof Error ? error.message : describeValue(error)}. It must return true or false.`,
          { cause: error },
        )
      }
    }
  }
  if (typeof use !== 'boolean') {
    throw new InvalidArgumentError(
      `useContextQuery must be true, false or a function of the shard, got ${describeValue(use)}.`,
    )
  }
  return () => use
}

/** How {@link OpenedPools} ends a pool, and what it does when that takes too long. */
export interface PoolShutdown<P> {
  /** Ends the pool gracefully (its connections say goodbye). @default pool.end() */
  end?(pool: P): unknown
  /** Closes the pool's connections at once (their sockets destroyed). */
  destroy(pool: P): unknown
}

/**
 * The pools a source opened from URLs, one per URL, so that `close()` ends exactly those and
 * leaves alone the pools the caller passed in.
 */
export class OpenedPools<P extends { end?(): unknown }> {
  private readonly pools = new Map<string, Promise<P>>()

  /**
   * @param open Opens the pool of a URL.
   * @param shutdown How to end a pool, and destroy it when ending takes longer than `close`'s
   *   bound (a server that stopped answering).
   */
  constructor(
    private readonly open: (url: string) => Promise<P>,
    private readonly shutdown?: PoolShutdown<P>,
  ) {}

  /** The pool for the URL, opened on first use. */
  get(url: string): Promise<P> {
    let pool = this.pools.get(url)
    if (!pool) {
      pool = this.open(url)
      this.pools.set(url, pool)
    }
    return pool
  }

  /**
   * Ends every pool opened so far (a pool that failed to open, or to end, is passed over). A pool
   * that has not ended after `timeoutMs` is destroyed, so `close` returns within about
   * `timeoutMs` whatever its servers do.
   */
  async close(timeoutMs = Number.POSITIVE_INFINITY): Promise<void> {
    const pools = [...this.pools.values()]
    this.pools.clear()
    const { shutdown } = this
    await Promise.all(
      pools.map((pool) =>
        pool.then(
          (p) =>
            closeWithin(
              timeoutMs,
              () => (shutdown?.end ? shutdown.end(p) : p.end?.()),
              () => shutdown?.destroy(p),
            ),
          () => undefined,
        ),
      ),
    )
  }
}

/** A socket as {@link OpenSockets} needs it (a `net.Socket`). */
export interface TrackedSocket {
  destroy(): unknown
  once(event: 'close', listener: () => void): unknown
}

/**
 * The sockets a pool's connections use (a driver's `stream` factory adds each), so that its
 * source can wait for them to close after a graceful end, and destroy those that do not: a
 * connection to a server that stopped answering otherwise stays half-closed, and keeps the
 * process alive, until the server wakes up.
 * @example
 * ```ts
 * import { Socket } from 'node:net'
 * import { closeWithin, OpenSockets } from '@shardflake/core'
 * declare function endPool(): Promise<void> // a pool whose driver makes its sockets with `stream`
 *
 * const sockets = new OpenSockets<Socket>()
 * const stream = () => sockets.add(new Socket()) // the pool's stream factory (pg, mysql2)
 * await closeWithin(
 *   2000,
 *   async () => {
 *     await endPool()
 *     await sockets.closed()
 *   },
 *   () => sockets.destroy(),
 * )
 * ```
 */
export class OpenSockets<S extends TrackedSocket = TrackedSocket> {
  private readonly open = new Set<S>()
  private readonly waiting = new Set<() => void>()

  /** Tracks `socket` until it closes; returns it. */
  add(socket: S): S {
    this.open.add(socket)
    socket.once('close', () => {
      this.open.delete(socket)
      if (this.open.size === 0) for (const resolve of this.waiting) resolve()
    })
    return socket
  }

  /** Resolves once every tracked socket has closed. */
  closed(): Promise<void> {
    if (this.open.size === 0) return Promise.resolve()
    return new Promise<void>((resolve) => {
      const done = () => {
        this.waiting.delete(done)
        resolve()
      }
      this.waiting.add(done)
    })
  }

  /** Destroys every socket still open. */
  destroy(): void {
    for (const socket of this.open) socket.destroy()
  }
}

/**
 * Waits for `graceful` (a pool's `end()`, a client's `QUIT`) at most `timeoutMs`; when it has not
 * finished by then, or failed, calls `force` (destroy the sockets). Never rejects, and leaves no
 * timer behind: a `close()` built on it returns within `timeoutMs` even when a server stopped
 * answering.
 * @example
 * ```ts
 * import { closeWithin } from '@shardflake/core'
 * declare const pool: { end(): Promise<void>; destroy(): void }
 *
 * await closeWithin(2000, () => pool.end(), () => pool.destroy())
 * ```
 */
export async function closeWithin(
  timeoutMs: number,
  graceful: () => unknown,
  force: () => unknown,
): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const ended = Promise.resolve()
    .then(graceful)
    .then(
      () => true,
      () => false,
    )
  const bound = Number.isFinite(timeoutMs)
    ? new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs)
      })
    : ended
  const done = await Promise.race([ended, bound])
  clearTimeout(timer)
  if (!done) {
    try {
      await force()
    } catch {}
  }
}

/**
 * The calls a source has running, so that its `close()` can end them: each call ends at once
 * with `CancelledError` when `close()` starts (nothing is issued to it), whatever its server does
 * then, and calls after `close()` are refused with `ConfigurationError`. Database sources run
 * every call through {@link RunningCalls.run}.
 * @example
 * ```ts
 * import { RunningCalls, withDeadline } from '@shardflake/core'
 * declare function draw(shard: number, signal: AbortSignal): Promise<bigint[]>
 *
 * const calls = new RunningCalls('MySource')
 * const ids = await calls.run('logical shard 5', undefined, (signal) =>
 *   withDeadline(() => draw(5, signal), { timeoutMs: 2000, signal, what: 'logical shard 5' }),
 * )
 * calls.close() // calls still running end with CancelledError
 * ```
 */
export class RunningCalls {
  private readonly running = new Set<() => void>()
  private isClosed = false

  /** @param source Named in messages: `'PostgresSource'`. */
  constructor(private readonly source: string) {}

  /** True once {@link close} was called. */
  get closed(): boolean {
    return this.isClosed
  }

  /** @throws ConfigurationError once the source is closed. */
  checkOpen(): void {
    if (this.isClosed) {
      throw new ConfigurationError(
        `This ${this.source} is closed: it issues no more IDs. Make a new one.`,
      )
    }
  }

  /**
   * What {@link run} checks before it starts a call, for a call that may finish without waiting
   * (an ID a buffer holds): the source is open, and the caller's `signal` is an `AbortSignal`
   * that has not aborted.
   * @throws ConfigurationError when the source is closed.
   * @throws InvalidArgumentError when `signal` is not an `AbortSignal`.
   * @throws CancelledError when `signal` has aborted.
   */
  check(what: string, signal: AbortSignal | undefined): void {
    this.checkOpen()
    checkSignal(signal, what)
    if (signal?.aborted) {
      throw new CancelledError(
        `The call to ${what} was cancelled by the caller before it started.`,
        { cause: signal.reason },
      )
    }
  }

  /**
   * Runs one call. `work` gets a signal that aborts when the caller's `signal` aborts or the
   * source closes: hand it to `withDeadline` (or the driver), so the work stops too. The call
   * rejects with `CancelledError` as soon as the source closes.
   * @throws ConfigurationError when the source is closed.
   * @throws InvalidArgumentError when `signal` is not an `AbortSignal`.
   * @throws CancelledError when `signal` has aborted already (before `work` starts).
   */
  run<T>(
    what: string,
    signal: AbortSignal | undefined,
    work: (signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    try {
      this.check(what, signal)
    } catch (error) {
      return Promise.reject(error)
    }
    const controller = new AbortController()
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => controller.abort(signal?.reason)
      const end = () => {
        reject(
          new CancelledError(
            `${what}: the ${this.source} was closed while the call ran. Nothing was issued.`,
          ),
        )
        controller.abort(new Error(`The ${this.source} was closed.`))
      }
      const finish = () => {
        this.running.delete(end)
        signal?.removeEventListener('abort', onAbort)
      }
      this.running.add(end)
      signal?.addEventListener('abort', onAbort, { once: true })
      let started: Promise<T>
      try {
        started = work(controller.signal)
      } catch (error) {
        finish()
        reject(error)
        return
      }
      started.then(
        (value) => {
          finish()
          resolve(value)
        },
        (error: unknown) => {
          finish()
          reject(error)
        },
      )
    })
  }

  /** Ends every running call with `CancelledError` and refuses new ones. Safe to call twice. */
  close(): void {
    this.isClosed = true
    const running = [...this.running]
    this.running.clear()
    for (const end of running) end()
  }
}
