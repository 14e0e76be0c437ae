import { ShardflakeError } from '@shardflake/core'
import fc from 'fast-check'

/**
 * Values that throw when turned into a string (`${value}`, `String(value)`, a property key): an
 * error message that prints one of them fails untyped instead of with its own error.
 */
export const unprintableValues: readonly unknown[] = [
  Object.create(null),
  { toString: 0 },
  [{ toString: 0 }],
]

/**
 * Any value a JavaScript caller (no type checker) might pass: fast-check's `anything()`, plus the
 * values that break naive checks (NaN, infinities, -0, unsafe and huge numbers, bigints, empty and
 * numeric-looking strings, an aborted signal, a signal-like object, a function, objects that cannot
 * be turned into a string).
 */
export const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.anything(),
  fc.constantFrom<unknown>(
    Number.NaN,
    Number.POSITIVE_INFINITY,
    Number.NEGATIVE_INFINITY,
    -0,
    2 ** 53,
    1e21,
    -1,
    1.5,
    '',
    ' ',
    '1',
    '0-3',
    'all',
    null,
    undefined,
    true,
    [],
    {},
    () => 1,
    AbortSignal.abort(),
    { aborted: true },
    ...unprintableValues,
  ),
  fc.bigInt(),
)

/**
 * Options as a user gets them wrong: anything at all, or `valid` with one option replaced by
 * {@link anyValue} (or removed), or with an option added under an unknown or misspelled name.
 */
export function mangledOptions<T extends object>(valid: T): fc.Arbitrary<unknown> {
  const keys = Object.keys(valid)
  return fc.oneof(
    anyValue,
    fc
      .tuple(fc.constantFrom(...keys), anyValue)
      .map(([key, value]) => ({ ...valid, [key]: value })),
    fc.constantFrom(...keys).map((key) => {
      const { [key]: _removed, ...rest } = valid as Record<string, unknown>
      return rest
    }),
    fc
      .tuple(
        fc.oneof(
          fc.string({ minLength: 1, maxLength: 12 }),
          fc.constantFrom(...keys).map((key) => key.toUpperCase()),
        ),
        anyValue,
      )
      .filter(([key]) => !keys.includes(key))
      .map(([key, value]) => ({ ...valid, [key]: value })),
  )
}

/**
 * `valid` with each option in turn replaced by each of `values`: every combination, for the
 * inputs a random sample reaches too rarely.
 */
export function eachOptionReplaced<T extends object>(
  valid: T,
  values: readonly unknown[] = unprintableValues,
): Record<string, unknown>[] {
  return Object.keys(valid).flatMap((key) => values.map((value) => ({ ...valid, [key]: value })))
}

/**
 * What `run` (a constructor or a call, sync or async) came to: `'ok'`, or the `code` of the
 * `ShardflakeError` it threw. Anything else it throws (a TypeError, a driver's error) fails the
 * test, naming the input.
 */
export async function outcomeOf(run: () => unknown, input: unknown): Promise<string> {
  try {
    await run()
    return 'ok'
  } catch (error) {
    if (error instanceof ShardflakeError && /^[A-Z_]+$/.test(error.code)) return error.code
    throw new Error(
      `An untyped failure (${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}) for ${fc.stringify(input)}`,
      { cause: error },
    )
  }
}

/**
 * Constructs `Class` with `options` as {@link outcomeOf} runs a call, then closes what it made.
 * @returns `'ok'` or the code of the `ShardflakeError` the constructor threw.
 */
export async function constructAndClose(
  Class: new (options: never) => { close(): unknown },
  options: unknown,
): Promise<string> {
  let made: { close(): unknown } | undefined
  const outcome = await outcomeOf(() => {
    made = Reflect.construct(Class, [options])
  }, options)
  await made?.close()
  return outcome
}

/**
 * Collects the unhandled rejections and uncaught exceptions of the process while a test runs:
 * a call that failed typed must not leave a promise or a timer that fails later. `check()` waits
 * `settleMs` for late failures and throws when there was one.
 */
export function watchUnhandled(): { check(settleMs?: number): Promise<void> } {
  const seen: unknown[] = []
  const onFailure = (error: unknown) => seen.push(error)
  process.on('unhandledRejection', onFailure)
  process.on('uncaughtException', onFailure)
  return {
    async check(settleMs = 200) {
      await new Promise((resolve) => setTimeout(resolve, settleMs))
      process.off('unhandledRejection', onFailure)
      process.off('uncaughtException', onFailure)
      if (seen.length > 0) {
        throw new Error(`${seen.length} failure(s) reached the process: ${String(seen[0])}`, {
          cause: seen[0],
        })
      }
    },
  }
}
