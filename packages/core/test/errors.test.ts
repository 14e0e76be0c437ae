import { describe, expect, it } from 'vitest'
import * as core from '../src'
import { ShardflakeError } from '../src'

/** An error class: its constructor, with the code every class names once. */
type ErrorClass = (new (...args: never[]) => ShardflakeError) & Pick<typeof ShardflakeError, 'code'>

/** Every error class core exports, found by walking the exports (a new one is covered at once). */
const classes: [string, ErrorClass][] = Object.entries(core as Record<string, unknown>).flatMap(
  ([name, value]) =>
    typeof value === 'function' && value.prototype instanceof ShardflakeError
      ? [[name, value as ErrorClass] as [string, ErrorClass]]
      : [],
)

/** The arguments before `options` for the constructors that take more than a message. */
const leading: Record<string, unknown[]> = {
  UnsafeNumberError: ['id', 2 ** 60],
  ShardOutOfRangeError: [9000, 'Shard 9000 is outside.'],
  InvalidIdentifierError: ['schema', 'bad name'],
  ClockMovedBackwardsError: [250, 100],
  ShardMovedError: [7, 'Shard 7 moved.'],
  ShardMovingError: [7, 'Shard 7 is moving.'],
  FanOutError: ['Server b failed.', [], []],
}

/** Classes whose code is not their name in capitals (the code says what happened to the call). */
const NAMED_OTHERWISE: Record<string, string> = { FanOutError: 'FAN_OUT_FAILED' }

const retryable = new Set([
  'CLOCK_MOVED_BACKWARDS',
  'SHARD_OVERLOADED',
  'CONNECTION_REFUSED',
  'CONNECTION_LOST',
  'TIMED_OUT',
  'LOCK_TIMEOUT',
  'SOURCE_UNAVAILABLE',
  'SHARD_MOVING',
  'DIRECTORY_STALE',
])

const codeOf = (name: string) =>
  NAMED_OTHERWISE[name] ??
  name
    .replace(/Error$/, '')
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toUpperCase()

describe('errors', () => {
  it('exports the error classes the sources and adapters rely on', () => {
    const names = classes.map(([name]) => name)
    for (const name of [
      'InvalidLayoutError',
      'ShardingMismatchError',
      'ShardOutOfRangeError',
      'MissingShardKeyError',
      'InvalidArgumentError',
      'InvalidShardRuleError',
      'ConfigurationError',
      'ShardConflictError',
      'ClockMovedBackwardsError',
      'ShardOverloadedError',
      'TimeExhaustedError',
      'ShardMovedError',
      'ConnectionRefusedError',
      'ConnectionLostError',
      'TimedOutError',
      'CancelledError',
      'LockTimeoutError',
      'SourceUnavailableError',
      'ShardMovingError',
      'WrongServerError',
      'FanOutError',
      'DirectoryChangedError',
      'DirectoryStaleError',
    ]) {
      expect(names).toContain(name)
    }
    expect(names).not.toContain('LayoutMismatchError')
  })

  it.each(classes)(
    '%s: a ShardflakeError with its code and name, carrying { cause }',
    (name, Class) => {
      const cause = new Error('from the driver')
      const error = new Class(...([...(leading[name] ?? ['what happened']), { cause }] as never[]))
      expect(error).toBeInstanceOf(ShardflakeError)
      expect(error).toBeInstanceOf(Error)
      expect(error.name).toBe(name)
      expect(error.code).toBe(codeOf(name))
      expect(error.code).toBe(Class.code)
      expect(error.cause).toBe(cause)
      expect(error.message.length).toBeGreaterThan(0)
      if (retryable.has(error.code)) expect(error.retryable).toBe(true)
      if (
        [
          'INVALID_ARGUMENT',
          'CONFIGURATION',
          'SHARDING_MISMATCH',
          'INVALID_SHARD_RULE',
          'WRONG_SERVER',
          'DIRECTORY_CHANGED',
        ].includes(error.code)
      ) {
        expect(error.retryable).toBe(false)
      }
      const overridden = new Class(
        ...([...(leading[name] ?? ['what happened']), { retryable: !error.retryable }] as never[]),
      )
      expect(overridden.retryable).toBe(!error.retryable)
      expect(overridden.cause).toBeUndefined()
    },
  )

  it('gives every class its own code, named once on the class', () => {
    expect(classes.length).toBeGreaterThanOrEqual(20)
    const codes = classes.map(([, Class]) => Class.code)
    expect(new Set(codes).size).toBe(classes.length)
    expect(new core.ShardOutOfRangeError(9, 'nine').shard).toBe(9)
    expect(new core.ShardMovedError(7, 'moved').shard).toBe(7)
    expect(new core.ShardMovingError(7, 'moving').shard).toBe(7)
    const failure = { server: 'b', shards: [3], error: new Error('down') }
    const fanOut = new core.FanOutError('b failed', ['row'], [failure])
    expect(fanOut.results).toEqual(['row'])
    expect(fanOut.failures).toEqual([failure])
  })

  it('ShardOverloadedError is retryable and not a clock fault', () => {
    const error = new core.ShardOverloadedError('too many IDs')
    expect(error.retryable).toBe(true)
    expect(error).not.toBeInstanceOf(core.ClockMovedBackwardsError)
  })
})
