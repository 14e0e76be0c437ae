import { CancelledError, InvalidArgumentError, TimedOutError } from './errors'
import { checkSignal } from './id-source'
import { describeValue } from './known-options'
import { MAX_DURATION_MS, readDuration } from './source-options'

/** What {@link withDeadline} takes. */
export interface DeadlineOptions {
  /** Give up after this many ms. */
  readonly timeoutMs: number
  /** The caller's signal: aborting it gives up at once. */
  readonly signal?: AbortSignal | undefined
  /** Named in the messages ("server 127.0.0.1:6379"). */
  readonly what: string
  /**
   * Called once when the deadline passes or the signal aborts, while `work` is still running:
   * cancel the statement on the server here (`pg_cancel_backend`, `KILL QUERY`), or destroy the
   * connection. Errors it throws are ignored.
   */
  readonly onGiveUp?: (reason: 'timeout' | 'cancel') => unknown
}

/**
 * Races `work` against a timeout and the caller's `AbortSignal`: what every database source does
 * around each call, so no caller waits on one sick server longer than `timeoutMs`.
 * @throws TimedOutError after `timeoutMs`.
 * @throws CancelledError when the signal aborts (before or during the call).
 * @example
 * ```ts
 * import { withDeadline } from '@shardflake/core'
 *
 * const rows = await withDeadline(() => fetch('http://ids.internal/7'), {
 *   timeoutMs: 2000,
 *   what: 'the ID service',
 * })
 * ```
 */
export function withDeadline<T>(work: () => Promise<T>, options: DeadlineOptions): Promise<T> {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError(
      `withDeadline needs options { timeoutMs, what, signal?, onGiveUp? }, got ${describeValue(options)}.`,
    )
  }
  const { timeoutMs, signal, what } = options
  if (typeof work !== 'function') {
    throw new InvalidArgumentError(
      `withDeadline needs the work as a function returning a promise, got ${describeValue(work)}.`,
    )
  }
  if (typeof what !== 'string') {
    throw new InvalidArgumentError(
      `withDeadline needs what (the service, named in its errors) as a string, got ${describeValue(what)}.`,
    )
  }
  readDuration('timeoutMs', timeoutMs, 0, { max: MAX_DURATION_MS })
  checkSignal(signal, what)
  if (options.onGiveUp !== undefined && typeof options.onGiveUp !== 'function') {
    throw new InvalidArgumentError(
      `withDeadline's onGiveUp must be a function, got ${describeValue(options.onGiveUp)}.`,
    )
  }
  throwIfCancelled(signal, what)
  return new Promise<T>((resolve, reject) => {
    let settled = false
    const finish = (action: () => void) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
      action()
    }
    const giveUp = (reason: 'timeout' | 'cancel', error: Error) => {
      finish(() => reject(error))
      try {
        Promise.resolve(options.onGiveUp?.(reason)).catch(() => {})
      } catch {}
    }
    const onAbort = () =>
      giveUp(
        'cancel',
        new CancelledError(`The call to ${what} was cancelled by the caller.`, {
          cause: signal?.reason,
        }),
      )
    const timer = setTimeout(
      () =>
        giveUp(
          'timeout',
          new TimedOutError(
            `${what} did not answer within ${timeoutMs} ms (timeoutMs). Nothing was issued; the server may be overloaded, stopped or unreachable.`,
          ),
        ),
      timeoutMs,
    )
    signal?.addEventListener('abort', onAbort, { once: true })
    let started: Promise<T>
    try {
      started = Promise.resolve(work())
    } catch (error) {
      started = Promise.reject(error)
    }
    started.then(
      (value) => finish(() => resolve(value)),
      (error: unknown) => finish(() => reject(error)),
    )
  })
}

/**
 * Throws `CancelledError` when `signal` has aborted; sources call it before starting work.
 * @throws CancelledError
 */
export function throwIfCancelled(signal: AbortSignal | undefined, what: string): void {
  checkSignal(signal, what)
  if (signal?.aborted) {
    throw new CancelledError(`The call to ${what} was cancelled by the caller before it started.`, {
      cause: signal.reason,
    })
  }
}
