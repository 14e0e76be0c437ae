import { describe, expect, it } from 'vitest'
import * as core from '../src'

const classes = Object.entries(core).filter(
  ([, value]) => typeof value === 'function' && value.prototype instanceof core.ShardflakeError,
) as [string, typeof core.ShardflakeError & { code: string }][]

describe('errors', () => {
  it('give every class its own stable code, its name, a cause and a retryable flag', () => {
    expect(classes.length).toBeGreaterThanOrEqual(20)
    const codes = new Set(classes.map(([, error]) => error.code))
    expect(codes.size).toBe(classes.length)
    const cause = new Error('driver failure')
    const lost = new core.ConnectionLostError('gone', { cause })
    expect(lost).toMatchObject({
      code: 'CONNECTION_LOST',
      name: 'ConnectionLostError',
      retryable: true,
    })
    expect(lost.cause).toBe(cause)
    expect(new core.ShardingMismatchError('differs')).toMatchObject({
      code: 'SHARDING_MISMATCH',
      retryable: false,
    })
    expect(new core.ShardOutOfRangeError(9, 'nine').shard).toBe(9)
    expect(new core.ClockMovedBackwardsError(5, 1).code).toBe('CLOCK_MOVED_BACKWARDS')
    expect(new core.ShardOverloadedError('busy', { retryable: false }).retryable).toBe(false)
  })
})
