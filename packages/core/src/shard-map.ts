import { InvalidArgumentError, ShardOutOfRangeError } from './errors'
import type { IdInput } from './id-value'
import { describeValue } from './known-options'
import type { Sharding } from './sharding'

/** Logical shards `from`..`to` (both inclusive) live on `target` (a pool, a URL, a name). */
export interface ShardRange<T> {
  from: number
  to: number
  target: T
}

/**
 * Maps logical shards to physical targets: Instagram's thousands of logical shards on a few
 * database servers. Moving a logical shard to another server changes this map, never its IDs.
 *
 * @example
 * ```ts
 * const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
 * const map = new ShardMap(sharding, [
 *   { from: 0, to: 999, target: 'postgres://db-a/app' },
 *   { from: 1000, to: 1999, target: 'postgres://db-b/app' },
 * ])
 * map.targetFor(1341) // 'postgres://db-b/app'
 * map.targetForId(id)  // where the row with this ID lives
 * ```
 */
export class ShardMap<T> {
  readonly sharding: Sharding
  /** The ranges, sorted by `from`. */
  readonly ranges: readonly ShardRange<T>[]

  /**
   * @throws InvalidArgumentError for overlapping ranges or bounds that are not integers.
   * @throws ShardOutOfRangeError for bounds outside the logical shards.
   */
  constructor(sharding: Sharding, ranges: readonly ShardRange<T>[]) {
    checkSharding(sharding, 'ShardMap')
    if (!Array.isArray(ranges)) {
      throw new InvalidArgumentError(
        `ShardMap takes a list of ranges [{ from, to, target }], got ${describeValue(ranges)}.`,
      )
    }
    ranges.forEach((range: unknown, index) => {
      if (typeof range !== 'object' || range === null || Array.isArray(range)) {
        throw new InvalidArgumentError(
          `ShardMap range ${index} must be { from, to, target }, got ${describeValue(range)}.`,
        )
      }
    })
    // Bounds first: sorting compares them, and a bigint or a string would not compare as a shard.
    for (const range of ranges) {
      sharding.checkShard(range.from)
      sharding.checkShard(range.to)
    }
    const sorted = [...ranges].sort((a, b) => a.from - b.from)
    let previous: ShardRange<T> | undefined
    for (const range of sorted) {
      if (range.to < range.from) {
        throw new InvalidArgumentError(
          `Shard range ${range.from}-${range.to} ends before it starts.`,
        )
      }
      if (previous && range.from <= previous.to) {
        throw new InvalidArgumentError(
          `Shard ranges ${previous.from}-${previous.to} and ${range.from}-${range.to} overlap: each logical shard lives on exactly one target.`,
        )
      }
      previous = range
    }
    this.sharding = sharding
    this.ranges = Object.freeze(sorted.map((range) => Object.freeze({ ...range })))
  }

  /** A map that puts every logical shard in `from`..`to` on one target. */
  static single<T>(sharding: Sharding, target: T, from = 0, to?: number): ShardMap<T> {
    checkSharding(sharding, 'ShardMap.single')
    return new ShardMap(sharding, [{ from, to: to ?? sharding.logicalShards - 1, target }])
  }

  /** The target holding a logical shard. @throws ShardOutOfRangeError when no range has it. */
  targetFor(shard: number): T {
    const range = this.rangeOf(shard)
    if (!range) {
      throw new ShardOutOfRangeError(
        shard,
        `Logical shard ${describeValue(shard)} is not in the shard map (${this.describe()}).`,
      )
    }
    return range.target
  }

  /** The target holding the row with this ID (its shard read from the ID). */
  targetForId(id: IdInput): T {
    return this.targetFor(this.sharding.shardOfId(id))
  }

  /** True when the map has this shard. */
  has(shard: number): boolean {
    return this.rangeOf(shard) !== undefined
  }

  /** Every logical shard of the map, ascending. */
  shards(): number[] {
    const all: number[] = []
    for (const { from, to } of this.ranges) for (let s = from; s <= to; s++) all.push(s)
    return all
  }

  /** Number of logical shards in the map. */
  get size(): number {
    return this.ranges.reduce((sum, { from, to }) => sum + to - from + 1, 0)
  }

  /** The distinct targets, in range order. */
  targets(): T[] {
    return [...new Set(this.ranges.map((range) => range.target))]
  }

  private rangeOf(shard: number): ShardRange<T> | undefined {
    let low = 0
    let high = this.ranges.length - 1
    while (low <= high) {
      const middle = (low + high) >> 1
      const range = this.ranges[middle]!
      if (shard < range.from) high = middle - 1
      else if (shard > range.to) low = middle + 1
      else return range
    }
    return undefined
  }

  private describe(): string {
    return this.ranges.map(({ from, to }) => (from === to ? `${from}` : `${from}-${to}`)).join(', ')
  }
}

/**
 * Parses `"0-1999"`, `"5"` or `"0-9,20-29"` into inclusive ranges, without expanding them (CLI
 * flags, env variables).
 * @throws InvalidArgumentError on anything else.
 */
export function parseShardRanges(text: string): { from: number; to: number }[] {
  if (typeof text !== 'string') {
    throw new InvalidArgumentError(
      `A shard list is text like "0-99,200", got ${describeValue(text)}.`,
    )
  }
  return text.split(',').map((part) => {
    const match = /^\s*(\d{1,15})\s*(?:-\s*(\d{1,15})\s*)?$/.exec(part)
    if (!match) {
      throw new InvalidArgumentError(
        `Not a shard list: ${describeValue(text)}. Write shards like "0-99,200" (or 'all').`,
      )
    }
    const from = Number(match[1])
    const to = match[2] === undefined ? from : Number(match[2])
    if (to < from) {
      throw new InvalidArgumentError(`Shard range ${part.trim()} ends before it starts.`)
    }
    return { from, to }
  })
}

/** Which logical shards: `'all'`, a list, an inclusive range, or a `"0-99,200"` string. */
export type ShardList = 'all' | readonly number[] | string | { from: number; to: number }

/**
 * The shards of a {@link ShardList}, distinct and ascending. Every bound is checked against the
 * logical shards before anything is expanded, so a stray `"0-4000000000"` fails at once.
 *
 * @example
 * ```ts
 * const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
 * readShardList('0-2,5', sharding) // [0, 1, 2, 5]
 * readShardList({ from: 7, to: 9 }, sharding) // [7, 8, 9]
 * readShardList('all', sharding) // 0 to 63
 * ```
 * @throws InvalidArgumentError for an empty list or a range that ends before it starts.
 * @throws ShardOutOfRangeError for a shard outside the logical shards.
 */
export function readShardList(shards: ShardList, sharding: Sharding): number[] {
  checkSharding(sharding, 'readShardList')
  let ranges: { from: number; to: number }[]
  if (shards === 'all') ranges = [{ from: 0, to: sharding.logicalShards - 1 }]
  else if (typeof shards === 'string') ranges = parseShardRanges(shards)
  else if (Array.isArray(shards)) {
    ranges = (shards as readonly number[]).map((shard) => ({ from: shard, to: shard }))
  } else if (typeof shards === 'object' && shards !== null) {
    ranges = [shards as { from: number; to: number }]
  } else {
    throw new InvalidArgumentError(
      `shards must be 'all', a list, a { from, to } range or a "0-99,200" string, got ${describeValue(shards)}.`,
    )
  }
  if (ranges.length === 0) throw new InvalidArgumentError('No shards given.')
  let count = 0
  for (const range of ranges) {
    if (typeof range !== 'object' || range === null) {
      throw new InvalidArgumentError(
        `shards must be 'all', a list, a { from, to } range or a "0-99,200" string, got a range ${describeValue(range)}.`,
      )
    }
    const { from, to } = range
    sharding.checkShard(from)
    sharding.checkShard(to)
    if (to < from) {
      throw new InvalidArgumentError(`Shard range ${from}-${to} ends before it starts.`)
    }
    count += to - from + 1
  }
  checkListSize(count, shards)
  const set = new Set<number>()
  for (const { from, to } of ranges) for (let shard = from; shard <= to; shard++) set.add(shard)
  return [...set].sort((a, b) => a - b)
}

/**
 * The most logical shards one list may expand to: {@link readShardList}, an in-process source's
 * `shards`, an installer's `shards`. A layout with 31 shard bits has 2^31 logical shards; listing
 * all of them would fill the process's memory, so such a list is refused at once.
 */
export const MAX_LISTED_SHARDS = 1_048_576

/** @throws InvalidArgumentError when a list of `count` shards is longer than {@link MAX_LISTED_SHARDS}. */
export function checkListSize(count: number, shards: unknown): void {
  if (count > MAX_LISTED_SHARDS) {
    throw new InvalidArgumentError(
      `The shards ${typeof shards === 'string' ? JSON.stringify(shards) : '(a list)'} are ${count} logical shards; at most ${MAX_LISTED_SHARDS} can be listed at once. Give fewer shards (a range such as "0-999") per process or installer run, or use fewer logicalShards.`,
    )
  }
}

/** @throws InvalidArgumentError unless `sharding` is a Sharding (from defineSharding). */
function checkSharding(sharding: unknown, who: string): void {
  const candidate = sharding as Partial<Sharding> | null | undefined
  if (
    typeof candidate !== 'object' ||
    candidate === null ||
    typeof candidate.logicalShards !== 'number' ||
    typeof candidate.checkShard !== 'function'
  ) {
    throw new InvalidArgumentError(
      `${who} needs the application's sharding (defineSharding({ layout, logicalShards })), got ${describeValue(sharding)}.`,
    )
  }
}

/**
 * The distinct logical shards of a write's rows, in the order they first appear. Indexed by shard,
 * not hashed: a write of thousands of rows has a few shards.
 * @param shards logical shards (whole numbers from 0), one per row.
 * @example
 * ```ts
 * distinctShards([7, 3, 7, 7, 3, 12]) // [7, 3, 12]
 * ```
 */
export function distinctShards(shards: readonly number[]): number[] {
  const seen: boolean[] = []
  const distinct: number[] = []
  for (const shard of shards) {
    if (seen[shard] === true) continue
    seen[shard] = true
    distinct.push(shard)
  }
  return distinct
}

/**
 * An ascending list of shards written the way {@link parseShardList} reads it: `"5-7,9"`.
 * @example
 * ```ts
 * formatShardList([5, 6, 7, 9]) // '5-7,9'
 * ```
 */
export function formatShardList(shards: readonly number[]): string {
  if (!Array.isArray(shards) || !shards.every((shard) => Number.isSafeInteger(shard))) {
    throw new InvalidArgumentError(
      `formatShardList takes a list of logical shards (whole numbers), got ${describeValue(shards)}.`,
    )
  }
  const parts: string[] = []
  for (let i = 0; i < shards.length; i++) {
    let j = i
    while (j + 1 < shards.length && shards[j + 1] === shards[j]! + 1) j++
    parts.push(i === j ? String(shards[i]) : `${shards[i]}-${shards[j]}`)
    i = j
  }
  return parts.join(',')
}
