import {
  CancelledError,
  ClockMovedBackwardsError,
  ConfigurationError,
  ConnectionLostError,
  ConnectionRefusedError,
  InvalidArgumentError,
  type Layout,
  LockTimeoutError,
  MissingShardKeyError,
  ShardflakeError,
  ShardingMismatchError,
  ShardMovedError,
  ShardOverloadedError,
  SourceUnavailableError,
  TimeExhaustedError,
} from '@shardflake/core'

/**
 * shardflake's own SQLSTATEs, raised by the SQL this package installs (class `SF`, outside the
 * ranges PostgreSQL uses).
 */
export const SQLSTATE = Object.freeze({
  /** The sequence is further ahead of the clock than calls may wait for: the clock stepped back. */
  clockBehind: 'SF001',
  /** A different sharding (layout or logicalShards) is recorded in the schema. */
  shardingMismatch: 'SF002',
  /** The shard is installed under another schema name, or not installed where it is fenced. */
  shardConflict: 'SF003',
  /** Draws kept meeting moves of the sequence (1000 attempts). */
  contention: 'SF004',
  /** The shard was moved to another database. */
  moved: 'SF005',
  /** More IDs asked of the shard in one call than it makes within its drift allowance. */
  overloaded: 'SF006',
  /** The layout's time field is used up. */
  timeExhausted: 'SF007',
  /** `shard_for_key`: the key is NULL, empty or only white space. */
  missingShardKey: 'SF008',
  /** `shard_for_key`: a number that is not an integer, or text over 1024 characters. */
  invalidShardKey: 'SF009',
})

/** What was going on when a driver call failed, for {@link translatePostgresError}. */
export interface PostgresFailure {
  /** Named in messages: "next_ids(5) of logical shard 7", "installPostgres". */
  readonly what: string
  /** The logical shard the call was for. */
  readonly shard?: number
  /** The layout of the call: tells an exhausted sequence from a fenced one. */
  readonly layout?: Layout
  /** How the shard's schema is named, for the "not installed" message. */
  readonly schemaPrefix?: string
  /** The source's logicalShards, for the "not installed" message. */
  readonly logicalShards?: number
  /** The failure came while opening a connection, before any statement ran. */
  readonly connecting?: boolean
  /** The connection ended during the call (node-postgres emitted `end` or `error` on it). */
  readonly connectionEnded?: boolean
}

const CONNECTION_LOST = new Set(['57P01', '57P02', '57P03', 'ECONNRESET', 'EPIPE', 'ECONNABORTED'])
const CONNECTION_REFUSED = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  '53300', // too_many_connections
])
const NOT_INSTALLED = new Set(['3F000', '42883', '42P01'])

/** The `code` of a driver error: a SQLSTATE (`57014`), a Node errno name (`ECONNRESET`), or undefined. */
function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null | undefined)?.code
  return typeof code === 'string' ? code : undefined
}

/** The JSON object the SQL attaches as DETAIL to its own errors, or {}. */
function detailOf(error: unknown): Record<string, unknown> {
  const detail = (error as { detail?: unknown } | null | undefined)?.detail
  if (typeof detail !== 'string') return {}
  try {
    const parsed: unknown = JSON.parse(detail)
    return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {}
  } catch {
    return {}
  }
}

/** The SQL's own message, without the `shardflake: ` prefix. */
function sqlMessage(error: unknown): string {
  return error instanceof Error ? error.message.replace(/^shardflake: /, '') : String(error)
}

/**
 * The one translation of what node-postgres or PGlite throws into a {@link ShardflakeError},
 * decided on structure: the SQLSTATE or errno name in `code`, the JSON DETAIL of shardflake's own
 * errors, and whether the connection ended during the call; never on message text. The driver's
 * error is kept as `cause`. A {@link ShardflakeError} is returned unchanged.
 */
export function translatePostgresError(error: unknown, failure: PostgresFailure): ShardflakeError {
  if (error instanceof ShardflakeError) return error
  const cause = { cause: error }
  const code = codeOf(error)
  const { what, shard } = failure
  switch (code) {
    case SQLSTATE.clockBehind: {
      const detail = detailOf(error)
      const translated = new ClockMovedBackwardsError(
        Number(detail.aheadMs ?? 0),
        Number(detail.maxWaitMs ?? 0),
        cause,
      )
      // The SQL knows more than the class's generic text: pass its own words through.
      translated.message = sqlMessage(error)
      return translated
    }
    case SQLSTATE.overloaded:
      return new ShardOverloadedError(sqlMessage(error), cause)
    case SQLSTATE.timeExhausted:
      return new TimeExhaustedError(sqlMessage(error), cause)
    case SQLSTATE.moved:
      return new ShardMovedError(shard ?? -1, sqlMessage(error), cause)
    case SQLSTATE.shardingMismatch:
      return new ShardingMismatchError(sqlMessage(error), cause)
    case SQLSTATE.shardConflict:
      return new ConfigurationError(sqlMessage(error), cause)
    case SQLSTATE.contention:
      return new SourceUnavailableError(sqlMessage(error), { cause, retryable: true })
    case SQLSTATE.missingShardKey:
      return new MissingShardKeyError(sqlMessage(error), cause)
    case SQLSTATE.invalidShardKey:
      return new InvalidArgumentError(sqlMessage(error), cause)
    case '57014':
      return new CancelledError(
        `${what} was cancelled by the server (statement_timeout, or pg_cancel_backend). Nothing was issued.`,
        cause,
      )
    case '55P03':
      return new LockTimeoutError(
        `${what}: a lock was not granted within lock_timeout (another session holds it). Nothing was issued.`,
        cause,
      )
    case '2200H':
    case '22003':
      return exhaustedOrMoved(error, failure)
    case '3D000':
      // invalid_catalog_name, at connect: a configuration error, not a server that is down.
      return new ConfigurationError(
        `Could not connect for ${what}: ${sqlMessage(error)} on that server (3D000). Check the database name in the URL or client options, or create that database and install there (installPostgres).`,
        cause,
      )
  }
  if (code !== undefined && NOT_INSTALLED.has(code) && shard !== undefined) {
    const schema = `${failure.schemaPrefix ?? 'shard_'}${shard}`
    return new ConfigurationError(
      `Logical shard ${shard} is not installed in the database the shard map gives for it (no schema ${schema} with next_ids). Install it there with installPostgres(client, { sharding, shards }), or check logicalShards: this source spreads keys over ${failure.logicalShards ?? '?'} logical shards, and every one of them must be installed somewhere.`,
      cause,
    )
  }
  if (code !== undefined && (CONNECTION_LOST.has(code) || code.startsWith('08'))) {
    return new ConnectionLostError(
      `The connection broke during ${what} (${code}): the server restarted or the session was terminated. Nothing was issued; the call may be retried.`,
      cause,
    )
  }
  if (code !== undefined && CONNECTION_REFUSED.has(code)) {
    return new ConnectionRefusedError(
      `Could not connect for ${what} (${code}): the server is down, unreachable or full.`,
      cause,
    )
  }
  if (code === undefined || !/^[0-9A-Z]{5}$/.test(code)) {
    // node-postgres rejects with a plain Error (no SQLSTATE) when the connection ends under a
    // query ("terminated unexpectedly") or cannot be opened: told apart by what the client did.
    if (failure.connecting) {
      return new ConnectionRefusedError(
        `Could not connect for ${what}: the server is down, unreachable or not answering.`,
        cause,
      )
    }
    if (failure.connectionEnded) {
      return new ConnectionLostError(
        `The connection ended during ${what}: the server went away. Nothing was issued; the call may be retried.`,
        cause,
      )
    }
  }
  if (code?.startsWith('42') || code?.startsWith('28')) {
    return new ConfigurationError(
      `${what} failed (${code}): check the installation and the role's privileges.`,
      cause,
    )
  }
  return new SourceUnavailableError(`${what} failed${code ? ` (${code})` : ''}.`, cause)
}

/**
 * A sequence at its end (`nextval` at MAXVALUE, `setval` out of bounds): the layout's time ran
 * out, or the shard was fenced by a move while the call ran. The layout tells which.
 */
function exhaustedOrMoved(error: unknown, failure: PostgresFailure): ShardflakeError {
  const { layout, shard, what } = failure
  if (layout) {
    try {
      layout.checkGenerating()
    } catch (exhausted) {
      if (exhausted instanceof ShardflakeError) {
        return new TimeExhaustedError(exhausted.message, { cause: error })
      }
    }
  }
  return new ShardMovedError(
    shard ?? -1,
    `The sequence of logical shard ${shard ?? '?'} is at its end in the database the shard map gives for it (${what}): the shard was moved to another database while the call ran. Update the shard map. No ID was issued.`,
    { cause: error },
  )
}
