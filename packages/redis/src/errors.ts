import {
  CancelledError,
  ConfigurationError,
  ConnectionLostError,
  ConnectionRefusedError,
  ShardflakeError,
  TimedOutError,
} from '@shardflake/core'

/** What the source knows about a server when a command on it failed. */
export interface FailureContext {
  /** `host:port` of the server. */
  readonly server: string
  /** The client's connection status when the command was sent (ioredis `status`). */
  readonly statusAtSend: string
  /** The client's connection status now. */
  readonly status: string
  /** The last error the client emitted on its `'error'` event since it was last ready. */
  readonly socketError: unknown
  /** How long the command ran, in ms, on the monotonic clock (`performance.now()`). */
  readonly elapsedMs: number
  /** The client's own command timeout, if any. */
  readonly commandTimeoutMs: number | undefined
}

/** How much earlier than its delay a Node timer can fire, measured on another clock, in ms. */
const TIMER_GRANULARITY_MS = 1

/** Socket `code`s of a server that could not be reached at all. */
const REFUSED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'])
/** Socket `code`s of a connection that broke. */
const LOST = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'ERR_STREAM_DESTROYED'])
/** Error reply codes (the first word of a Redis error reply) of a server that is not serving now. */
const NOT_SERVING = new Set(['LOADING', 'BUSY', 'MASTERDOWN', 'TRYAGAIN', 'CLUSTERDOWN'])
/** node-redis error classes, by name. */
const NODE_REDIS: Record<string, 'lost' | 'timeout'> = {
  SocketClosedUnexpectedlyError: 'lost',
  ClientClosedError: 'lost',
  ConnectionTimeoutError: 'timeout',
  SocketTimeoutError: 'timeout',
  TimeoutError: 'timeout',
}

/**
 * Translates a failure of one Redis command into a {@link ShardflakeError}, reading its structure
 * (socket `code`, the reply's error code, the client's connection state, the error class),
 * never its message. The driver's error becomes `cause`.
 */
export function translateRedisError(error: unknown, context: FailureContext): ShardflakeError {
  if (error instanceof ShardflakeError) return error
  const { server } = context
  const cause = { cause: error }
  const code = codeOf(error)
  if (code === 'ABORT_ERR' || nameOf(error) === 'AbortError') {
    return new CancelledError(`The call to Redis ${server} was cancelled.`, cause)
  }
  if (code !== undefined && REFUSED.has(code)) return refused(server, code, error)
  if (code !== undefined && LOST.has(code)) return lost(server, code, error)
  if (code === 'ETIMEDOUT') return connectTimedOut(server, error)
  const name = nameOf(error)
  if (name === 'ReplyError') {
    const reply = replyCode(error)
    if (reply !== undefined && NOT_SERVING.has(reply)) {
      return new ConnectionRefusedError(
        `Redis ${server} is not serving commands right now (${reply}): it is loading, busy or has no master. Nothing was issued; the next server is tried.`,
        cause,
      )
    }
    return new ConfigurationError(
      `Redis ${server} refused the ID script (${reply ?? 'error reply'}): check that it is Redis 6.2 or later, writable (not a replica), within maxmemory, and that the user may run EVALSHA on the key prefix.`,
      cause,
    )
  }
  if (name in NODE_REDIS) {
    return NODE_REDIS[name] === 'lost'
      ? lost(server, name, error)
      : new TimedOutError(`Redis ${server} did not answer in time. Nothing was issued.`, cause)
  }
  // ioredis rejects with plain errors when its own command timeout passes, and when the
  // connection is not usable (closed, reconnecting, the retry limit of a queued command
  // reached): tell them apart by the time the command took, the client's state and the socket
  // error it reported. Node's timers count whole milliseconds from a start rounded down, so the
  // command timeout can fire up to 1 ms before `commandTimeout` has passed on another clock.
  if (
    name !== 'MaxRetriesPerRequestError' &&
    context.commandTimeoutMs !== undefined &&
    context.elapsedMs >= context.commandTimeoutMs - TIMER_GRANULARITY_MS
  ) {
    return new TimedOutError(
      `Redis ${server} did not answer within ${context.commandTimeoutMs} ms (commandTimeout). Nothing was issued; the server may be overloaded, stopped or unreachable.`,
      cause,
    )
  }
  const connected = context.statusAtSend === 'ready' && context.status === 'ready'
  if (!connected || name === 'MaxRetriesPerRequestError') {
    const socketCode = codeOf(context.socketError)
    if (context.statusAtSend !== 'ready' && socketCode !== undefined) {
      if (REFUSED.has(socketCode)) return refused(server, socketCode, error)
      if (socketCode === 'ETIMEDOUT') return connectTimedOut(server, error)
    }
    return lost(server, socketCode ?? context.status, error)
  }
  return lost(server, name, error)
}

function refused(server: string, code: string, error: unknown): ConnectionRefusedError {
  return new ConnectionRefusedError(
    `Redis ${server} could not be reached (${code}): it is down, or the host or port is wrong. Nothing was issued.`,
    { cause: error },
  )
}

function connectTimedOut(server: string, error: unknown): TimedOutError {
  return new TimedOutError(
    `Redis ${server} did not complete the connection in time (ETIMEDOUT): it is stopped, overloaded or unreachable. Nothing was issued.`,
    { cause: error },
  )
}

function lost(server: string, why: string, error: unknown): ConnectionLostError {
  return new ConnectionLostError(
    `The connection to Redis ${server} broke during the call (${why}). Nothing was issued; IDs the server may have used are dropped, never issued twice.`,
    { cause: error },
  )
}

function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null | undefined)?.code
  return typeof code === 'string' ? code : undefined
}

function nameOf(error: unknown): string {
  if (typeof error !== 'object' || error === null) return ''
  const name = (error as { name?: unknown }).name
  return typeof name === 'string' ? name : (error.constructor?.name ?? '')
}

/** The error code of a Redis error reply: by protocol, its first word in capitals. */
function replyCode(error: unknown): string | undefined {
  const message = (error as { message?: unknown }).message
  if (typeof message !== 'string') return undefined
  const word = message.split(' ', 1)[0]
  return word && /^[A-Z]+$/.test(word) ? word : undefined
}
