import { InvalidArgumentError } from './errors'

/**
 * Refuses an options object that is not an object, or that has a property the callee does not
 * know, naming the closest known one: a misspelled `timeoutMS` or `maxDriftMS` would otherwise be
 * ignored in silence and the default used. Every public constructor and function that takes
 * options calls it first. Properties whose value is `undefined` are ignored, so spreading partial
 * options stays allowed.
 *
 * @param where Named in the message: `'PrefetchSource options'`, `'shardedIds()'`.
 * @param options What the caller passed; `undefined` passes when `required` is false.
 * @param known Every option name the callee reads.
 * @throws InvalidArgumentError naming the unknown option and the closest known one.
 * @example
 * ```ts
 * import { checkKnownOptions } from '@shardflake/core'
 *
 * checkKnownOptions('MysqlSource options', { timeoutMs: 500 }, ['timeoutMs', 'maxDriftMs']) // passes
 * checkKnownOptions('MysqlSource options', { timeoutMS: 500 }, ['timeoutMs', 'maxDriftMs'])
 * // throws: MysqlSource options has no option "timeoutMS". Did you mean "timeoutMs"? Known options: timeoutMs, maxDriftMs.
 * ```
 */
export function checkKnownOptions(
  where: string,
  options: unknown,
  known: readonly string[],
  { required = true }: { readonly required?: boolean } = {},
): void {
  if (options === undefined && !required) return
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidArgumentError(
      `${where} must be an object with the options ${known.join(', ')}, got ${describeValue(options)}.`,
    )
  }
  for (const name of Object.keys(options)) {
    if (known.includes(name) || (options as Record<string, unknown>)[name] === undefined) continue
    const closest = closestName(name, known)
    throw new InvalidArgumentError(
      `${where} has no option ${JSON.stringify(name)}.${closest ? ` Did you mean ${JSON.stringify(closest)}?` : ''} Known options: ${known.join(', ')}.`,
    )
  }
}

/** A short, safe description of any value for an error message. */
export function describeValue(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  switch (typeof value) {
    case 'undefined':
      return 'undefined'
    case 'string':
      return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)
    case 'bigint':
      return `${value}n`
    case 'number':
    case 'boolean':
      return String(value)
    case 'function':
      return 'a function'
    case 'symbol':
      return 'a symbol'
    default:
      return 'an object'
  }
}

/** The known name nearest to `name` (case-insensitive edit distance), when it is near enough. */
function closestName(name: string, known: readonly string[]): string | undefined {
  let best: string | undefined
  let bestDistance = Number.POSITIVE_INFINITY
  for (const candidate of known) {
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase())
    if (distance < bestDistance) {
      best = candidate
      bestDistance = distance
    }
  }
  return bestDistance <= Math.max(2, Math.floor(name.length / 3)) ? best : undefined
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        previous[j]! + 1,
        current[j - 1]! + 1,
        previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1),
      )
    }
    previous = current
  }
  return previous[b.length]!
}
