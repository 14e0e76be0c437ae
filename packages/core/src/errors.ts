/**
 * Every error shardflake throws is a {@link ShardflakeError} with a stable {@link ShardflakeError.code}.
 * Match on `code` (or `instanceof` a subclass); messages are for people and may change. Errors
 * that come from a driver carry the driver's error as `cause`.
 *
 * @example
 * ```ts
 * import { ShardflakeError, type IdSource } from '@shardflake/core'
 * declare const source: IdSource
 *
 * try {
 *   await source.nextId(9000)
 * } catch (error) {
 *   if (error instanceof ShardflakeError && error.retryable) {
 *     // a server was down, busy or slow: the same call may succeed later
 *   }
 * }
 * ```
 */
export class ShardflakeError extends Error {
  /** Stable, machine-readable identifier of the failure. */
  readonly code: ShardflakeErrorCode
  /**
   * True when the same call may succeed if tried again later (a server down or slow, a clock
   * that will catch up, a shard busy this millisecond); false when something must be changed
   * first (configuration, input, a shard map).
   */
  readonly retryable: boolean

  /** Each subclass names its code once, here. */
  static readonly code: ShardflakeErrorCode

  constructor(message: string, options?: ShardflakeErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    const code = new.target.code
    this.code = code
    this.name = new.target.name
    this.retryable = options?.retryable ?? RETRYABLE.has(code)
  }
}

/** What every {@link ShardflakeError} constructor takes besides its message. */
export interface ShardflakeErrorOptions {
  /** The error this one explains, usually the driver's. */
  readonly cause?: unknown
  /** Overrides the code's default {@link ShardflakeError.retryable}. */
  readonly retryable?: boolean
}

/** All codes a {@link ShardflakeError} can carry. */
export type ShardflakeErrorCode =
  | 'INVALID_LAYOUT'
  | 'SHARDING_MISMATCH'
  | 'INVALID_ID'
  | 'UNSAFE_NUMBER'
  | 'SHARD_OUT_OF_RANGE'
  | 'MISSING_SHARD_KEY'
  | 'INVALID_ARGUMENT'
  | 'INVALID_IDENTIFIER'
  | 'INVALID_SHARD_RULE'
  | 'CONFIGURATION'
  | 'SHARD_CONFLICT'
  | 'CLOCK_MOVED_BACKWARDS'
  | 'SHARD_OVERLOADED'
  | 'TIME_EXHAUSTED'
  | 'SHARD_MOVED'
  | 'CONNECTION_REFUSED'
  | 'CONNECTION_LOST'
  | 'TIMED_OUT'
  | 'CANCELLED'
  | 'LOCK_TIMEOUT'
  | 'SOURCE_UNAVAILABLE'
  | 'LEASE_EXPIRED'
  | 'NO_FREE_LEASE'
  | 'SHARD_KEY_CHANGED'
  | 'MISPLACED_ID'
  | 'SHARD_MOVING'
  | 'WRONG_SERVER'
  | 'FAN_OUT_FAILED'
  | 'DIRECTORY_CHANGED'
  | 'DIRECTORY_STALE'
  | 'ROWS_MISMATCH'

const RETRYABLE = new Set<ShardflakeErrorCode>([
  'CLOCK_MOVED_BACKWARDS',
  'SHARD_OVERLOADED',
  'CONNECTION_REFUSED',
  'CONNECTION_LOST',
  'TIMED_OUT',
  'LOCK_TIMEOUT',
  'SOURCE_UNAVAILABLE',
  'LEASE_EXPIRED',
  'NO_FREE_LEASE',
  'SHARD_MOVING',
  'DIRECTORY_STALE',
])

/** A layout definition is impossible (widths, epoch, time unit) or is used for something it cannot do. */
export class InvalidLayoutError extends ShardflakeError {
  static override readonly code = 'INVALID_LAYOUT'
}

/**
 * The layout or the number of logical shards differs between two parts that must agree: the
 * application and what is installed in a database, two sources of one application, a source and
 * an adapter. Rows would land on different shards depending on who placed them.
 */
export class ShardingMismatchError extends ShardflakeError {
  static override readonly code = 'SHARDING_MISMATCH'
}

/** A value is not an ID of the layout (not an integer, out of the 64-bit range, too wide). */
export class InvalidIdError extends ShardflakeError {
  static override readonly code = 'INVALID_ID'
}

/** A JavaScript `number` above 2^53 reached an API that needs exact 64-bit integers. */
export class UnsafeNumberError extends ShardflakeError {
  static override readonly code = 'UNSAFE_NUMBER'
  constructor(what: string, value: number, options?: ShardflakeErrorOptions) {
    super(
      `${what} ${value} is not a safe integer: JavaScript numbers lose precision above 2^53. Pass a bigint or a decimal string instead.`,
      options,
    )
  }
}

/** A shard number is outside the layout, the logical shards, or the shards a source serves. */
export class ShardOutOfRangeError extends ShardflakeError {
  static override readonly code = 'SHARD_OUT_OF_RANGE'
  readonly shard: number | bigint | string

  constructor(shard: number | bigint | string, message: string, options?: ShardflakeErrorOptions) {
    super(message, options)
    this.shard = shard
  }
}

/** An entity or row has no value for the field its shard is derived from. */
export class MissingShardKeyError extends ShardflakeError {
  static override readonly code = 'MISSING_SHARD_KEY'
}

/** An argument has the wrong type or value (a count out of bounds, an unknown preset, ...). */
export class InvalidArgumentError extends ShardflakeError {
  static override readonly code = 'INVALID_ARGUMENT'
}

/** A schema, table or database name is not a plain identifier and was refused. */
export class InvalidIdentifierError extends ShardflakeError {
  static override readonly code = 'INVALID_IDENTIFIER'
  constructor(kind: string, value: string, options?: ShardflakeErrorOptions) {
    super(
      `Refusing ${kind} name ${JSON.stringify(value)}: use 1-63 characters of a-z, 0-9 and _, starting with a letter or _.`,
      options,
    )
  }
}

/**
 * A shard rule cannot work: it names no field, names a field that does not exist, or keys a row
 * by a field that holds another sharded row's ID (`shardBy` on a sharded foreign key would read
 * the ID's low bits; `sameShardAs` takes the parent's shard). Thrown when the entity or schema is
 * defined, before any row is written.
 */
export class InvalidShardRuleError extends ShardflakeError {
  static override readonly code = 'INVALID_SHARD_RULE'
}

/** Options that cannot work together (a lossy driver setting, a missing option, ...). */
export class ConfigurationError extends ShardflakeError {
  static override readonly code = 'CONFIGURATION'
}

/**
 * Two sources (or two adapters) would make IDs for the same logical shard in one process. Their
 * IDs could meet on the same time and sequence, so the second is refused. Close the first, or
 * give each its own shards.
 */
export class ShardConflictError extends ShardflakeError {
  static override readonly code = 'SHARD_CONFLICT'
}

/** The clock went backwards further than the generator is allowed to wait out. Nothing was issued. */
export class ClockMovedBackwardsError extends ShardflakeError {
  static override readonly code = 'CLOCK_MOVED_BACKWARDS'
  /** How far the clock is behind the time of the last ID, in ms. */
  readonly behindMs: number

  /**
   * @param maxWaitMs the wait the generator was allowed, named in the default message.
   * @param options `message` replaces the default message (a source whose limit has another name).
   */
  constructor(
    behindMs: number,
    maxWaitMs: number,
    options?: ShardflakeErrorOptions & { readonly message?: string },
  ) {
    super(
      options?.message ??
        `The clock is ${behindMs} ms behind the time of the last ID issued, more than the ${maxWaitMs} ms this generator may wait. No ID was issued. Fix the clock (NTP slew, not step), or raise maxWaitMs.`,
      options,
    )
    this.behindMs = behindMs
  }
}

/**
 * More IDs were asked of one shard than it can make within its drift allowance (the layout's
 * capacity per time unit times `maxDriftMs`). The clock is fine; nothing was issued. Ask for
 * fewer IDs per call, spread rows over more shards, or raise `maxDriftMs`.
 */
export class ShardOverloadedError extends ShardflakeError {
  static override readonly code = 'SHARD_OVERLOADED'
}

/** The layout's time field is used up, or the next ID would set the sign bit without opt-in. */
export class TimeExhaustedError extends ShardflakeError {
  static override readonly code = 'TIME_EXHAUSTED'
}

/**
 * The database a source asked for a logical shard's IDs no longer serves it: the shard was moved
 * to another database, so the shard map is out of date. Nothing was issued. Point the shard map
 * at the new home; retrying against the old one will keep failing.
 */
export class ShardMovedError extends ShardflakeError {
  static override readonly code = 'SHARD_MOVED'
  readonly shard: number

  constructor(shard: number, message: string, options?: ShardflakeErrorOptions) {
    super(message, options)
    this.shard = shard
  }
}

/** The server refused the connection or could not be found (down, wrong host or port). */
export class ConnectionRefusedError extends ShardflakeError {
  static override readonly code = 'CONNECTION_REFUSED'
}

/**
 * The connection broke while a call was under way (the server restarted, the session was
 * terminated). IDs the server may have used are dropped, never issued twice.
 */
export class ConnectionLostError extends ShardflakeError {
  static override readonly code = 'CONNECTION_LOST'
}

/** The server did not answer within the source's `timeoutMs`. Nothing was issued to the caller. */
export class TimedOutError extends ShardflakeError {
  static override readonly code = 'TIMED_OUT'
}

/**
 * The call was cancelled: by the caller's `AbortSignal`, or by the server (a statement timeout,
 * `pg_cancel_backend`, `KILL QUERY`). Nothing was issued to the caller.
 */
export class CancelledError extends ShardflakeError {
  static override readonly code = 'CANCELLED'
}

/** The server gave up waiting for a lock (another session holds the shard's counter). */
export class LockTimeoutError extends ShardflakeError {
  static override readonly code = 'LOCK_TIMEOUT'
}

/** A source could not reach any of its servers. `cause` holds the last server's failure. */
export class SourceUnavailableError extends ShardflakeError {
  static override readonly code = 'SOURCE_UNAVAILABLE'
}

/**
 * A leased source stopped issuing IDs: its lease could not be renewed in time (the registry was
 * unreachable) and may have expired, or another holder took it over. Nothing was issued. The
 * source tries to renew or take a new lease in the background; retry shortly.
 */
export class LeaseExpiredError extends ShardflakeError {
  static override readonly code = 'LEASE_EXPIRED'
}

/** Every worker the registry may lease is held by a live holder. Retry after a TTL, or use a layout with more worker bits. */
export class NoFreeLeaseError extends ShardflakeError {
  static override readonly code = 'NO_FREE_LEASE'
}

/**
 * A row's shard key or parent changed so that its rule now places it on another shard than the
 * one its ID names, and the ID cannot follow. Thrown for an update or upsert that sets the shard
 * key (or parent) of a stored row, and for a row that got its ID early (an ORM that assigns keys
 * when an entity is created) whose key then changed while another row already references that ID.
 * Nothing was written. An ID never changes shard: keep the key on the same shard, or write a new
 * row (with a new ID) under the new key.
 */
export class ShardKeyChangedError extends ShardflakeError {
  static override readonly code = 'SHARD_KEY_CHANGED'
}

/**
 * An ID the caller gave a new row is on another logical shard than the row's shard rule gives
 * (its key, its parent's ID, or its fixed shard): stored, the row would sit where no lookup by its
 * key finds it, and its children would follow it there. Nothing was written. Leave the ID out to
 * get one on the right shard; to import rows that must keep their IDs, write them inside
 * `trustSuppliedIds(() => ...)`.
 */
export class MisplacedIdError extends ShardflakeError {
  static override readonly code = 'MISPLACED_ID'
}

/**
 * A write to a logical shard that is being moved to another server: its home in the shard
 * directory is `switching` (the old server is about to refuse writes) or `arriving` (the new
 * server holds every row and takes writes once the move finishes). The router waited up to its
 * `switchWaitMs` first. Nothing was written; retry shortly, the switch takes a few seconds.
 * @example
 * ```ts
 * import { ShardMovingError, type ShardHomes } from '@shardflake/core'
 * declare const homes: ShardHomes<unknown>
 *
 * try {
 *   await homes.writeHome(17)
 * } catch (error) {
 *   if (error instanceof ShardMovingError) {
 *     // shard 17 is switching servers: answer 503 with Retry-After, or queue the write
 *   }
 * }
 * ```
 */
export class ShardMovingError extends ShardflakeError {
  static override readonly code = 'SHARD_MOVING'
  readonly shard: number

  constructor(shard: number, message: string, options?: ShardflakeErrorOptions) {
    super(message, options)
    this.shard = shard
  }
}

/**
 * A row was about to be written through a server that is not its logical shard's home in the
 * shard directory (a handle used directly for a row of another server, or a row of another
 * server inside a transaction pinned to one). Nothing was written: write it through the handle
 * the router gives for its shard.
 * @example
 * ```ts
 * import type { ShardHomes } from '@shardflake/core'
 * declare const homes: ShardHomes<unknown>
 *
 * homes.checkHome('a', 45) // throws WrongServerError when shard 45 lives on another server
 * ```
 */
export class WrongServerError extends ShardflakeError {
  static override readonly code = 'WRONG_SERVER'
}

/**
 * One server of a fan-out that failed, as {@link FanOutError} reports it.
 * @example
 * ```ts
 * import type { FanOutFailure } from '@shardflake/core'
 *
 * const failure: FanOutFailure = { server: 'b', shards: [21, 22], error: new Error('ECONNREFUSED') }
 * ```
 */
export interface FanOutFailure {
  /** The server's name. */
  readonly server: string
  /** The logical shards it was asked about. */
  readonly shards: readonly number[]
  /** What its query threw (the driver's or ORM's error as it is). */
  readonly error: unknown
}

/**
 * An explicit fan-out in which some servers failed. `results` holds the merged rows of the
 * servers that answered (ordered and limited as asked), `failures` says which servers failed and
 * why. Retryable when every failure is a retryable {@link ShardflakeError}.
 * @example
 * ```ts
 * import { FanOutError, type ShardHomes } from '@shardflake/core'
 * type Pool = { query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> } // a pg.Pool
 * declare const homes: ShardHomes<Pool>
 *
 * const query = async (pool: Pool) =>
 *   (await pool.query('SELECT id::text AS id FROM posts ORDER BY id DESC LIMIT 20')).rows as { id: string }[]
 * try {
 *   await homes.fanOut(query, { orderBy: (row) => row.id, limit: 20 })
 * } catch (error) {
 *   if (error instanceof FanOutError) {
 *     const partial = error.results // the newest 20 of the servers that answered
 *     const down = error.failures.map((failure) => failure.server)
 *   }
 * }
 * ```
 */
export class FanOutError<R = unknown> extends ShardflakeError {
  static override readonly code = 'FAN_OUT_FAILED'
  /** The rows of the servers that answered, merged as the fan-out asked. */
  readonly results: readonly R[]
  /** One entry per server that failed. */
  readonly failures: readonly FanOutFailure[]

  constructor(
    message: string,
    results: readonly R[],
    failures: readonly FanOutFailure[],
    options?: ShardflakeErrorOptions,
  ) {
    super(message, options)
    this.results = results
    this.failures = failures
  }
}

/**
 * A compare-and-set of the shard directory lost: its version is no longer the one the change was
 * based on, because another process changed it first. Nothing was written. Read the directory
 * again and decide anew; repeating the same call fails the same way.
 * @example
 * ```ts
 * import { DirectoryChangedError, type ShardDirectory } from '@shardflake/core'
 * declare const directory: ShardDirectory
 *
 * const current = await directory.read()
 * try {
 *   await directory.compareAndSet(current.version, current.entries)
 * } catch (error) {
 *   if (error instanceof DirectoryChangedError) {
 *     // another process changed it first: read again and decide anew
 *   }
 * }
 * ```
 */
export class DirectoryChangedError extends ShardflakeError {
  static override readonly code = 'DIRECTORY_CHANGED'
}

/**
 * The shard directory was last read longer ago than its `maxStaleMs` (the process was paused,
 * or the directory could not be read), so routing now might send the call to a server that no
 * longer holds the shard. Nothing was routed. A new read is under way: retry shortly. `cause`
 * holds the last read's failure, if it failed.
 * @example
 * ```ts
 * import { DirectoryStaleError, type ShardHomes } from '@shardflake/core'
 * declare const homes: ShardHomes<unknown>
 *
 * let server: string
 * try {
 *   server = homes.serverOf(17)
 * } catch (error) {
 *   if (!(error instanceof DirectoryStaleError)) throw error
 *   await homes.refresh() // read the directory again, then route
 *   server = homes.serverOf(17)
 * }
 * ```
 */
export class DirectoryStaleError extends ShardflakeError {
  static override readonly code = 'DIRECTORY_STALE'
}

/**
 * Runs one call on a server (a connect, a query, a registry command) and reports its failure the
 * way every shardflake failure is reported: shardflake's own errors pass through, anything else
 * (the driver's) becomes `SourceUnavailableError` ("<failure>: <the driver's message>") with the
 * driver's error as `cause`.
 * @example
 * ```ts
 * import { serverCall } from '@shardflake/core'
 * declare const client: { connect(): Promise<void> }
 *
 * await serverCall('Could not connect to the database', () => client.connect())
 * ```
 */
export async function serverCall<T>(failure: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run()
  } catch (error) {
    if (error instanceof ShardflakeError) throw error
    throw new SourceUnavailableError(
      `${failure}: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    )
  }
}

/**
 * A move of rows found the two servers different after it had made them equal (the counts or
 * SHA-256 checksums of a table's moved rows differ): something wrote to the rows while writes were
 * held, outside `ShardHomes` or by hand. Nothing switched: the shards serve on the source again;
 * run the move again.
 * @example
 * ```ts
 * import { moveShardHomes, RowsMismatchError, type MoveShardHomesOptions } from '@shardflake/core'
 * declare const options: MoveShardHomesOptions
 *
 * try {
 *   await moveShardHomes(options)
 * } catch (error) {
 *   if (error instanceof RowsMismatchError) {
 *     // the shards still serve on the source: find who wrote behind the router, then move again
 *   }
 * }
 * ```
 */
export class RowsMismatchError extends ShardflakeError {
  static override readonly code = 'ROWS_MISMATCH'
}
