import {
  ClockMovedBackwardsError,
  ConfigurationError,
  InvalidArgumentError,
  LayoutMismatchError,
  ShardflakeError,
  ShardMovedError,
  ShardOutOfRangeError,
  TimeExhaustedError,
} from '@shardflake/core'
import { SIGNAL_PREFIX } from './sql'

/** A driver error as mysql2 reports it. @internal */
export interface DriverError {
  code?: string
  errno?: number
  sqlState?: string
  sqlMessage?: string
  message?: string
  fatal?: boolean
}

/** @internal */
export function asDriverError(error: unknown): DriverError | undefined {
  return typeof error === 'object' && error !== null ? (error as DriverError) : undefined
}

/** The parsed `shardflake:KIND:...` message a routine SIGNALed, if any. @internal */
export function routineSignal(error: unknown): { kind: string; rest: string } | undefined {
  // An ORM's connection (`context.query`) may wrap the driver's error.
  const wrapper = asDriverError(error) as { driverError?: unknown; cause?: unknown } | undefined
  const e = [error, wrapper?.driverError, wrapper?.cause]
    .map(asDriverError)
    .find((candidate) => candidate?.sqlState !== undefined)
  const text = e?.sqlMessage ?? ''
  if (e?.sqlState !== '45000' || !text.startsWith(SIGNAL_PREFIX)) return undefined
  const body = text.slice(SIGNAL_PREFIX.length)
  const colon = body.indexOf(':')
  return { kind: body.slice(0, colon), rest: body.slice(colon + 1) }
}

/** Translates a SIGNAL of the routines into a ShardflakeError (other errors unchanged). @internal */
export function translateRoutineError(error: unknown, shard: number, maxWaitMs: number): unknown {
  if (error instanceof ShardflakeError) return error
  const signal = routineSignal(error)
  if (!signal) return error
  const message = `${signal.kind}: ${signal.rest.trim()}`
  switch (signal.kind) {
    case 'CLOCK':
      return new ClockMovedBackwardsError(Number.parseInt(signal.rest, 10) || 0, maxWaitMs)
    case 'COUNT':
      return new InvalidArgumentError(message)
    case 'EXHAUSTED':
      return new TimeExhaustedError(message)
    case 'LAYOUT':
      return new LayoutMismatchError(message)
    case 'MOVED':
      // A draw on the old home: the shard map is out of date. (The installer's refusal to
      // revive a moved shard is a configuration error.)
      return signal.rest.trim().endsWith('update the shard map')
        ? new ShardMovedError(shard, movedMessage(signal.rest, shard))
        : new ConfigurationError(movedMessage(signal.rest, shard))
    case 'SHARD':
      return new ShardOutOfRangeError(shard, message)
    default:
      return new ConfigurationError(message)
  }
}

/** The MOVED signal in words: which shard, where to, and what to do. */
function movedMessage(rest: string, shard: number): string {
  const text = rest.trim()
  const sentence = `${text.charAt(0).toUpperCase()}${text.slice(1)}`
  // The installer's refusal ("... move it back instead") says what to do already.
  if (!text.endsWith('update the shard map')) return `${sentence}.`
  return `${sentence}: the shard map still sends logical shard ${shard} to its old server, which refuses it since the move (moveMysqlShards). Point the shard map at the new home. Nothing was handed out.`
}

const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTFOUND',
  'EPIPE',
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
  'ER_CON_COUNT_ERROR',
  'ER_SERVER_SHUTDOWN',
  'ER_CONNECTION_KILLED',
  'POOL_CLOSED',
])

/** True for errors that mean the server cannot be reached (try another one). @internal */
export function isConnectionError(error: unknown): boolean {
  const e = asDriverError(error)
  if (!e) return false
  if (e.code && CONNECTION_CODES.has(e.code)) return true
  if (/closed state|connection lost|server has gone away/i.test(e.message ?? '')) return true
  return e.fatal === true
}
