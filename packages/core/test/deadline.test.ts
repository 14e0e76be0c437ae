import { afterEach, describe, expect, it, vi } from 'vitest'
import {
  CancelledError,
  InvalidArgumentError,
  MAX_DURATION_MS,
  readDuration,
  type ShardflakeError,
  SOURCE_DEFAULTS,
  TimedOutError,
  throwIfCancelled,
  withDeadline,
} from '../src'

const never = () => new Promise<never>(() => {})

describe('withDeadline', () => {
  afterEach(() => vi.useRealTimers())

  it('passes the result and the error of work that settles in time through unchanged', async () => {
    expect(await withDeadline(async () => 42, { timeoutMs: 1_000, what: 'work' })).toBe(42)
    const failure = new Error('from the driver')
    await expect(
      withDeadline(async () => Promise.reject(failure), { timeoutMs: 1_000, what: 'work' }),
    ).rejects.toBe(failure)
  })

  it('gives up after timeoutMs with TimedOutError and calls onGiveUp("timeout") once', async () => {
    vi.useFakeTimers()
    const onGiveUp = vi.fn()
    const result = withDeadline(never, { timeoutMs: 500, what: 'server 10.0.0.1', onGiveUp })
    const settled = result.catch((error: unknown) => error)
    await vi.advanceTimersByTimeAsync(499)
    expect(onGiveUp).not.toHaveBeenCalled()
    await vi.advanceTimersByTimeAsync(1)
    const error = await settled
    expect(error).toBeInstanceOf(TimedOutError)
    expect((error as ShardflakeError).code).toBe('TIMED_OUT')
    expect((error as Error).message).toMatch(/server 10\.0\.0\.1.*500 ms/)
    expect(onGiveUp).toHaveBeenCalledTimes(1)
    expect(onGiveUp).toHaveBeenCalledWith('timeout')
  })

  it('gives up when the caller aborts, with CancelledError carrying the reason', async () => {
    vi.useFakeTimers()
    const controller = new AbortController()
    const onGiveUp = vi.fn(() => {
      throw new Error('cancelling failed too') // ignored
    })
    const result = withDeadline(never, {
      timeoutMs: 10_000,
      signal: controller.signal,
      what: 'the ID service',
      onGiveUp,
    })
    const settled = result.catch((error: unknown) => error)
    const reason = new Error('user went away')
    controller.abort(reason)
    const error = await settled
    expect(error).toBeInstanceOf(CancelledError)
    expect((error as ShardflakeError).code).toBe('CANCELLED')
    expect((error as Error).cause).toBe(reason)
    expect(onGiveUp).toHaveBeenCalledWith('cancel')
    await vi.advanceTimersByTimeAsync(20_000) // the timer was cleared: nothing more happens
    expect(onGiveUp).toHaveBeenCalledTimes(1)
  })

  it('does not start work for a signal that has already aborted', () => {
    const work = vi.fn(never)
    const signal = AbortSignal.abort()
    expect(() => withDeadline(work, { timeoutMs: 1_000, signal, what: 'work' })).toThrow(
      CancelledError,
    )
    expect(work).not.toHaveBeenCalled()
    expect(() => throwIfCancelled(signal, 'work')).toThrow(CancelledError)
    throwIfCancelled(new AbortController().signal, 'work')
    throwIfCancelled(undefined, 'work')
  })
})

describe('readDuration and SOURCE_DEFAULTS', () => {
  it('has one set of defaults', () => {
    expect(SOURCE_DEFAULTS).toEqual({
      maxDriftMs: 1000,
      maxWaitMs: 100,
      timeoutMs: 2000,
      retryAfterMs: 1000,
    })
    expect(Object.isFrozen(SOURCE_DEFAULTS)).toBe(true)
  })

  it('gives the fallback for undefined and accepts integers within the bounds', () => {
    expect(readDuration('timeoutMs', undefined, 2000)).toBe(2000)
    expect(readDuration('timeoutMs', 0, 2000)).toBe(0)
    expect(readDuration('timeoutMs', MAX_DURATION_MS, 2000)).toBe(MAX_DURATION_MS)
    expect(readDuration('maxWaitMs', 5, 100, { min: 5, max: 10 })).toBe(5)
  })

  it('refuses 1e14, negatives, fractions, NaN and non-numbers with InvalidArgumentError naming the option', () => {
    for (const value of [1e14, MAX_DURATION_MS + 1, -1, 1.5, Number.NaN, Infinity, '5', null]) {
      expect(() => readDuration('timeoutMs', value as number, 2000), String(value)).toThrow(
        InvalidArgumentError,
      )
    }
    expect(() => readDuration('timeoutMs', 1e14, 2000)).toThrow(/timeoutMs/)
    expect(() => readDuration('maxWaitMs', 11, 100, { min: 5, max: 10 })).toThrow(/5 to 10/)
    expect(() => readDuration('maxWaitMs', 4, 100, { min: 5, max: 10 })).toThrow(
      InvalidArgumentError,
    )
  })
})
