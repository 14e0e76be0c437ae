import { InvalidArgumentError } from './errors'
import { describeValue } from './known-options'

/**
 * The defaults every source shares, so one option means the same everywhere. Each source's
 * options document which of these it uses.
 */
export const SOURCE_DEFAULTS = Object.freeze({
  /**
   * How far a shard's time field may run ahead of the clock, in ms: a burst borrows future
   * ticks up to this far, and a clock step back up to this far is absorbed.
   */
  maxDriftMs: 1000,
  /** The longest a source waits for the clock to catch up before it throws, in ms. */
  maxWaitMs: 100,
  /** The longest a database source waits for a server's answer before it gives up on it, in ms. */
  timeoutMs: 2000,
  /** How long a source skips a server that failed before trying it again, in ms. */
  retryAfterMs: 1000,
})

/** The largest value each duration option accepts: one day, in ms. */
export const MAX_DURATION_MS = 86_400_000

/**
 * Reads a whole-number option: `undefined` gives `fallback`; anything else must be an integer
 * from `min` to `max`. Call it where the option is first read, so a bad value fails at once.
 * @throws InvalidArgumentError naming the option and its bounds.
 * @example
 * ```ts
 * import { readInteger } from '@shardflake/core'
 *
 * readInteger('cache', undefined, 1, { min: 1, max: 1_000_000 }) // 1
 * readInteger('cache', 0, 1, { min: 1, max: 1_000_000 }) // throws: cache must be an integer from 1 to 1000000, got 0.
 * ```
 */
export function readInteger(
  name: string,
  value: number | undefined,
  fallback: number,
  bounds: { readonly min: number; readonly max: number; readonly unit?: string },
): number {
  if (value === undefined) return fallback
  const { min, max } = bounds
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    const what = bounds.unit ? `an integer number of ${bounds.unit}` : 'an integer'
    throw new InvalidArgumentError(
      `${name} must be ${what} from ${min} to ${max}, got ${describeValue(value)}.`,
    )
  }
  return value
}

/**
 * Reads a duration option in ms: `undefined` gives `fallback`; anything else must be an integer
 * from `min` (default 0) to `max` (default one day). Sources call it in their constructors, so a
 * bad value fails at startup.
 * @throws InvalidArgumentError naming the option and its bounds.
 */
export function readDuration(
  name: string,
  value: number | undefined,
  fallback: number,
  bounds: { readonly min?: number; readonly max?: number } = {},
): number {
  return readInteger(name, value, fallback, {
    min: bounds.min ?? 0,
    max: bounds.max ?? MAX_DURATION_MS,
    unit: 'ms',
  })
}

/**
 * Reads one of the shared source options (`maxDriftMs`, `maxWaitMs`, `timeoutMs`,
 * `retryAfterMs`) with its default from {@link SOURCE_DEFAULTS}, so a name always comes with
 * the same default.
 * @throws InvalidArgumentError naming the option and its bounds.
 */
export function readSourceDuration(
  name: keyof typeof SOURCE_DEFAULTS,
  value: number | undefined,
  bounds: { readonly min?: number; readonly max?: number } = {},
): number {
  return readDuration(name, value, SOURCE_DEFAULTS[name], bounds)
}
