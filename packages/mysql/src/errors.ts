import {
  CancelledError,
  ClockMovedBackwardsError,
  ConfigurationError,
  ConnectionLostError,
  ConnectionRefusedError,
  InvalidArgumentError,
  LockTimeoutError,
  MissingShardKeyError,
  ShardflakeError,
  ShardingMismatchError,
  ShardMovedError,
  ShardOutOfRangeError,
  ShardOverloadedError,
  SourceUnavailableError,
  TimedOutError,
  TimeExhaustedError,
} from '@shardflake/core'
import { SIGNALS } from './sql/signals'

/** A driver error as mysql2 reports it. @internal */
export interface DriverError {
  code?: string
  errno?: number
  sqlState?: string
  sqlMessage?: string
  message?: string
  fatal?: boolean
}

/**
 * The driver error inside `error`: itself, or what an ORM's connection (`context.query`) wrapped
 * (`driverError`, `cause`). Undefined for anything without a `code`, `errno` or `sqlState`. @internal
 */
export function driverError(error: unknown): DriverError | undefined {
  const seen = new Set<unknown>()
  let candidate: unknown = error
  while (typeof candidate === 'object' && candidate !== null && !seen.has(candidate)) {
    seen.add(candidate)
    const e = candidate as DriverError & { driverError?: unknown; cause?: unknown }
    if (e.sqlState !== undefined || e.errno !== undefined || typeof e.code === 'string') return e
    candidate = e.driverError ?? e.cause
  }
  return undefined
}

/** Server errors (errno) and client codes, by what they mean. */
const CANCELLED_ERRNOS = new Set([
  1317 /* ER_QUERY_INTERRUPTED */, 1969 /* MariaDB ER_STATEMENT_TIMEOUT */,
  3024 /* MySQL ER_QUERY_TIMEOUT */,
])
const LOCK_ERRNOS = new Set([1205 /* ER_LOCK_WAIT_TIMEOUT */, 1213 /* ER_LOCK_DEADLOCK */])
const CRASHED_ERRNOS = new Set([
  126 /* HA_ERR_CRASHED */, 144 /* HA_ERR_CRASHED_ON_REPAIR */, 145 /* HA_ERR_CRASHED_ON_USAGE */,
  1194 /* ER_CRASHED_ON_USAGE */, 1195 /* ER_CRASHED_ON_REPAIR */,
])
const NOT_INSTALLED_ERRNOS = new Set([
  1049 /* ER_BAD_DB_ERROR */, 1146 /* ER_NO_SUCH_TABLE */, 1305 /* ER_SP_DOES_NOT_EXIST */,
])
const LOST_ERRNOS = new Set([
  1053 /* ER_SERVER_SHUTDOWN */, 1927 /* MariaDB ER_CONNECTION_KILLED */,
  4031 /* MySQL ER_CLIENT_INTERACTION_TIMEOUT */,
])
const REFUSED_ERRNOS = new Set([
  1040 /* ER_CON_COUNT_ERROR */, 1129 /* ER_HOST_IS_BLOCKED */, 1130 /* ER_HOST_NOT_PRIVILEGED */,
])
const REFUSED_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
])
const LOST_CODES = new Set([
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
  'ECONNRESET',
  'EPIPE',
  'ER_CONNECTION_KILLED',
  'ER_SERVER_SHUTDOWN',
])

/** Where a failure happened, for the messages. @internal */
export interface FailureContext {
  /** "logical shard 5 (database shard_5)", "ticket server 1 (database tickets)". */
  readonly what: string
  /** The logical shard, when the call was for one. */
  readonly shard?: number
  /** How long the source waited for the clock before giving up (for clock errors). */
  readonly maxWaitMs?: number
  /** How far the server clock is behind, when known. */
  readonly behindMs?: number
  /** The message when what the call needs is not installed (default: run installMysql). */
  readonly notInstalled?: string
  /** The failure came while connecting (or from a statement that cannot fail otherwise). */
  readonly connecting?: boolean
}

/** Errors of opening a connection (see {@link connectFailure}). */
const connectFailures = new WeakSet<object>()

/**
 * Notes that `error` came while opening a connection, so that {@link translateError} reads an
 * unknown database as the connection's, not a shard's. Returns it. @internal
 */
export function connectFailure(error: unknown): unknown {
  if (typeof error === 'object' && error !== null) connectFailures.add(error)
  return error
}

/**
 * Every failure of a MySQL/MariaDB call as a {@link ShardflakeError}, decided on the error's
 * structure only: the SQLSTATE of a routine's SIGNAL (class `SF`), the server's errno, the
 * client's connection-error `code`, the driver's `fatal` flag. Never on message text. The driver
 * error is the `cause`.
 * @internal
 */
export function translateError(error: unknown, context: FailureContext): ShardflakeError {
  if (error instanceof ShardflakeError) return error
  const e = driverError(error)
  const options = { cause: error }
  const { what } = context
  const What = `${what.charAt(0).toUpperCase()}${what.slice(1)}`
  const shard = context.shard ?? -1
  const server = e?.sqlMessage ? ` (${e.sqlMessage})` : ''
  switch (e?.sqlState) {
    case SIGNALS.CLOCK_BEHIND:
      return new ClockMovedBackwardsError(context.behindMs ?? 0, context.maxWaitMs ?? 0, options)
    case SIGNALS.OVERLOADED:
      return new ShardOverloadedError(
        `More IDs were asked of ${what} than it makes within its drift allowance (maxDriftMs); the clock is fine and nothing was issued. Ask for fewer IDs per call, spread rows over more shards, or install with a larger maxDriftMs.${server}`,
        options,
      )
    case SIGNALS.SHARDING_MISMATCH:
      return new ShardingMismatchError(
        `${What} was installed with another layout or logicalShards: use the sharding it was installed with. Nothing was changed.${server}`,
        options,
      )
    case SIGNALS.EXHAUSTED:
      return new TimeExhaustedError(
        `The layout's time field is used up on ${what}: no more IDs can be made with it. Define a layout with a later epoch.${server}`,
        options,
      )
    case SIGNALS.MOVED:
      return new ShardMovedError(
        shard,
        `${What} moved to another server (moveMysqlShards) and its old server refuses it: the shard map still sends logical shard ${shard} there. Point the shard map at the new home. Nothing was issued.${server}`,
        options,
      )
    case SIGNALS.MOVED_AWAY:
      return new ShardMovedError(
        shard,
        `${What} moved from this server to another one: installing it here again would issue IDs its new home issues too. Nothing was changed. To bring it back, move it back (moveMysqlShards).${server}`,
        options,
      )
    case SIGNALS.COUNT:
      return new InvalidArgumentError(
        `${What}: the count must be from 1 to 1000000.${server}`,
        options,
      )
    case SIGNALS.WRONG_SHARD:
      return new ShardOutOfRangeError(
        shard,
        `${What}: the shard key belongs to another logical shard.${server}`,
        options,
      )
    case SIGNALS.MISSING_KEY:
      return new MissingShardKeyError(
        `${What}: the shard key is missing (NULL, empty or only white space). Set it before inserting.${server}`,
        options,
      )
    case SIGNALS.INVALID_KEY:
      return new InvalidArgumentError(
        `${What}: the shard key is outside the keys shardflake places (text over 1024 characters, or U+0000). Shorten the key or remove the character.${server}`,
        options,
      )
    case SIGNALS.MISSING:
      return new ConfigurationError(
        `${What} has no counter row (sf_counter): run installMysql there again.${server}`,
        options,
      )
    case SIGNALS.TICKET_MISMATCH:
    case SIGNALS.TICKET_PAUSED:
    case SIGNALS.TICKET_MISSING:
      return new ConfigurationError(
        `${What} refused the call: it holds another increment or offset than this source asked with, is paused by an unfinished reconfiguration, or has no ticket row. Nothing was issued: two configurations would hand out the same tickets. Configure the recorded values, or run installTicketServers (with reconfigure: true to change them).${server}`,
        options,
      )
  }
  const errno = e?.errno ?? -1
  const code = e?.code ?? ''
  if (CANCELLED_ERRNOS.has(errno)) {
    return new CancelledError(
      `${What}: the statement was cancelled by the server (KILL QUERY, or a statement time limit). Nothing was issued to the caller.`,
      options,
    )
  }
  if (LOCK_ERRNOS.has(errno)) {
    return new LockTimeoutError(
      `${What}: a lock was not granted in time (another session holds the counter or the shard's metadata). Try again; look for long transactions on that server.`,
      options,
    )
  }
  if (CRASHED_ERRNOS.has(errno)) {
    return new SourceUnavailableError(
      `${What}: its counter table is marked crashed (the server stopped uncleanly) and is not repaired yet. Nothing was issued. The server repairs Aria and MyISAM tables when it next opens them if aria_recover_options / myisam_recover_options allow it (MariaDB's default); retry shortly, and if it keeps failing run REPAIR TABLE on that table.${server}`,
      options,
    )
  }
  if (errno === 1049 && (context.connecting || connectFailures.has(error as object))) {
    // ER_BAD_DB_ERROR while connecting: the database named in the connection, not a shard's.
    return new ConfigurationError(
      `Could not connect for ${what}: the database the connection names does not exist on that server${server}. Fix the database in the URL or pool options, or leave it out (mysql://user@host:3306/): every logical shard has a database of its own.`,
      options,
    )
  }
  if (NOT_INSTALLED_ERRNOS.has(errno)) {
    return new ConfigurationError(
      context.notInstalled ??
        `${What} is not installed on the server the shard map gives for it: run installMysql(pool, { sharding, shards }) there with the application's sharding (its layout and logicalShards), or fix the shard map.${server}`,
      options,
    )
  }
  if (REFUSED_CODES.has(code) || REFUSED_ERRNOS.has(errno)) {
    return new ConnectionRefusedError(
      `${What}: the server refused the connection or could not be found (${code || errno}). Check that it runs and that the URL is right.`,
      options,
    )
  }
  if (code === 'ETIMEDOUT') {
    return new TimedOutError(
      `${What}: connecting to the server timed out; it is unreachable or overloaded.`,
      options,
    )
  }
  if (LOST_CODES.has(code) || LOST_ERRNOS.has(errno) || e?.fatal === true) {
    return new ConnectionLostError(
      `${What}: the connection to the server broke during the call (${code || errno}); the server restarted, or the session was killed. IDs it may have used are dropped, never issued twice; the call may be tried again.`,
      options,
    )
  }
  return new ConfigurationError(
    `${What} failed${e ? ` with ${code || errno}${server}` : `: ${String((error as Error | undefined)?.message ?? error)}`}.`,
    options,
  )
}

/** True for failures that mean "try another server" (refused, lost, timed out). @internal */
export function isServerFailure(error: ShardflakeError): boolean {
  return (
    error.code === 'CONNECTION_REFUSED' ||
    error.code === 'CONNECTION_LOST' ||
    error.code === 'TIMED_OUT'
  )
}
