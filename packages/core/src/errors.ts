/**
 * Every error shardflake throws is a {@link ShardflakeError} with a stable {@link ShardflakeError.code}.
 * Match on `code` (or `instanceof` a subclass); messages are for people and may change.
 *
 * @example
 * ```ts
 * try {
 *   source.nextId(9000)
 * } catch (error) {
 *   if (error instanceof ShardflakeError && error.code === 'SHARD_OUT_OF_RANGE') {
 *     // the shard key mapped outside the layout
 *   }
 * }
 * ```
 */
export class ShardflakeError extends Error {
  /** Stable, machine-readable identifier of the failure. */
  readonly code: ShardflakeErrorCode

  constructor(code: ShardflakeErrorCode, message: string, options?: ErrorOptions) {
    super(message, options)
    this.code = code
    this.name = new.target.name
  }
}

/** All codes a {@link ShardflakeError} can carry. */
export type ShardflakeErrorCode =
  | 'INVALID_LAYOUT'
  | 'LAYOUT_MISMATCH'
  | 'INVALID_ID'
  | 'UNSAFE_NUMBER'
  | 'SHARD_OUT_OF_RANGE'
  | 'MISSING_SHARD_KEY'
  | 'INVALID_ARGUMENT'
  | 'CLOCK_MOVED_BACKWARDS'
  | 'TIME_EXHAUSTED'
  | 'INVALID_IDENTIFIER'
  | 'CONFIGURATION'
  | 'SOURCE_UNAVAILABLE'
  | 'SHARD_MOVED'

/** A layout definition is impossible (widths, epoch, time unit) or is used for something it cannot do. */
export class InvalidLayoutError extends ShardflakeError {
  constructor(message: string) {
    super('INVALID_LAYOUT', message)
  }
}

/** The layout installed in a database differs from the one the application uses. */
export class LayoutMismatchError extends ShardflakeError {
  constructor(message: string) {
    super('LAYOUT_MISMATCH', message)
  }
}

/** A value is not an ID of the layout (not an integer, out of the 64-bit range, too wide). */
export class InvalidIdError extends ShardflakeError {
  constructor(message: string) {
    super('INVALID_ID', message)
  }
}

/** A JavaScript `number` above 2^53 reached an API that needs exact 64-bit integers. */
export class UnsafeNumberError extends ShardflakeError {
  constructor(what: string, value: number) {
    super(
      'UNSAFE_NUMBER',
      `${what} ${value} is not a safe integer: JavaScript numbers lose precision above 2^53. Pass a bigint or a decimal string instead.`,
    )
  }
}

/** A shard number is outside the layout or outside the shards a source serves. */
export class ShardOutOfRangeError extends ShardflakeError {
  readonly shard: number | bigint | string

  constructor(shard: number | bigint | string, message: string) {
    super('SHARD_OUT_OF_RANGE', message)
    this.shard = shard
  }
}

/** An entity or row has no value for the field its shard is derived from. */
export class MissingShardKeyError extends ShardflakeError {
  constructor(message: string) {
    super('MISSING_SHARD_KEY', message)
  }
}

/** An argument has the wrong type or value (a count below 1, an unknown preset, ...). */
export class InvalidArgumentError extends ShardflakeError {
  constructor(message: string) {
    super('INVALID_ARGUMENT', message)
  }
}

/** The clock went backwards further than the generator is allowed to wait out. */
export class ClockMovedBackwardsError extends ShardflakeError {
  /** How far the clock is behind the time of the last ID, in ms. */
  readonly behindMs: number

  constructor(behindMs: number, maxWaitMs: number) {
    super(
      'CLOCK_MOVED_BACKWARDS',
      `The clock is ${behindMs} ms behind the time of the last ID issued, more than the ${maxWaitMs} ms this generator may wait. No ID was issued. Fix the clock (NTP slew, not step), or raise maxWaitMs.`,
    )
    this.behindMs = behindMs
  }
}

/** The layout's time field is used up, or the next ID would set the sign bit without opt-in. */
export class TimeExhaustedError extends ShardflakeError {
  constructor(message: string) {
    super('TIME_EXHAUSTED', message)
  }
}

/** A schema, table or database name is not a plain identifier and was refused. */
export class InvalidIdentifierError extends ShardflakeError {
  constructor(kind: string, value: string) {
    super(
      'INVALID_IDENTIFIER',
      `Refusing ${kind} name ${JSON.stringify(value)}: use 1-63 characters of a-z, 0-9 and _, starting with a letter or _.`,
    )
  }
}

/** Options that cannot work together (two sources for one shard, a lossy driver setting, ...). */
export class ConfigurationError extends ShardflakeError {
  constructor(message: string) {
    super('CONFIGURATION', message)
  }
}

/** A source could not reach any of its servers. */
export class SourceUnavailableError extends ShardflakeError {
  constructor(message: string, options?: ErrorOptions) {
    super('SOURCE_UNAVAILABLE', message, options)
  }
}

/**
 * The database a source asked for a logical shard's IDs no longer serves it: the shard was moved
 * to another database (`moveShards`), so the shard map is out of date. Nothing was issued.
 * Point the shard map at the new home; retrying against the old one will keep failing.
 */
export class ShardMovedError extends ShardflakeError {
  constructor(
    readonly shard: number,
    message: string,
  ) {
    super('SHARD_MOVED', message)
  }
}
