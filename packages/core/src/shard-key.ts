import { InvalidArgumentError, MissingShardKeyError, ShardOutOfRangeError } from './errors'
import { type IdInput, toBigInt } from './id-value'
import type { Layout } from './layout'

/** A value a row is sharded by: a user id (integer) or any string key. */
export type ShardKey = bigint | number | string

/**
 * How a string shard key is read.
 * - `'auto'`: a string of digits is an integer (ORMs and drivers hand BIGINT columns to JS as
 *   strings, and `'31341'` must land where `31341n` does); any other string is hashed.
 * - `'hash'`: every string is hashed, digits or not (zip codes, phone numbers).
 */
export type StringKeyMode = 'auto' | 'hash'

const DIGITS = /^-?\d+$/

/**
 * The logical shard of an integer key: `key mod logicalShards`, always non-negative
 * (Instagram: user 31341 with 2000 logical shards lands on shard 1341).
 *
 * @example
 * ```ts
 * integerShard(31341n, 2000) // 1341
 * ```
 */
export function integerShard(key: bigint | number | string, logicalShards: number): number {
  const count = checkLogicalShards(logicalShards)
  const value = toBigInt(key, 'Shard key')
  const shards = BigInt(count)
  return Number(((value % shards) + shards) % shards)
}

/**
 * The logical shard of a string key: 32-bit FNV-1a over the key's UTF-8 bytes, mod
 * `logicalShards`. The hash is fixed and documented so that any language can compute it:
 * start with 0x811c9dc5; for each byte, xor it in, then multiply by 0x01000193 modulo 2^32.
 *
 * @example
 * ```ts
 * hashShard('acme.example', 2000)
 * ```
 */
export function hashShard(key: string, logicalShards: number): number {
  const count = checkLogicalShards(logicalShards)
  return fnv1a32(key) % count
}

/** 32-bit FNV-1a of the UTF-8 bytes of `text`, as an unsigned integer. */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5
  for (const byte of new TextEncoder().encode(text)) {
    hash ^= byte
    hash = Math.imul(hash, 0x01000193)
  }
  return hash >>> 0
}

/**
 * The logical shard of any key: integers (and digit strings, in `'auto'` mode) by modulo,
 * other strings by {@link hashShard}.
 * @throws MissingShardKeyError for `null`/`undefined`.
 */
export function shardForKey(
  key: ShardKey | null | undefined,
  logicalShards: number,
  mode: StringKeyMode = 'auto',
): number {
  if (key === null || key === undefined) {
    throw new MissingShardKeyError('The shard key is missing (null or undefined).')
  }
  if (typeof key === 'string' && (mode === 'hash' || !DIGITS.test(key))) {
    return hashShard(key, logicalShards)
  }
  return integerShard(key, logicalShards)
}

/**
 * Where a row's shard comes from.
 * - `shardBy`: a field (or function) giving a {@link ShardKey}; reduced with {@link shardForKey}.
 * - `sameShardAs`: a field (or function) giving a parent's ID; the row goes where the parent is
 *   (comments with their post), read with `layout.shardOf`.
 * - `shard`: a fixed logical shard.
 */
export type ShardRule<T = Record<string, unknown>> =
  | {
      readonly shardBy: (keyof T & string) | ((entity: T) => ShardKey | null | undefined)
      /** @default 'auto' */
      readonly stringKeys?: StringKeyMode
    }
  | { readonly sameShardAs: (keyof T & string) | ((entity: T) => IdInput | null | undefined) }
  | { readonly shard: number }

/** What {@link resolveShard} needs besides the rule and the entity. */
export interface ResolveShardOptions {
  layout: Layout
  /** Keys are reduced modulo this; at most `layout.shardCount`. */
  logicalShards: number
  /** Named in error messages. */
  entityName?: string
}

/**
 * Applies a {@link ShardRule} to one entity or row. Adapters call this for every new row.
 * @throws MissingShardKeyError when the rule's field is empty.
 * @throws ShardOutOfRangeError when the result lies outside the layout or the logical shards.
 */
export function resolveShard<T>(
  rule: ShardRule<T>,
  entity: T,
  options: ResolveShardOptions,
): number {
  const { layout, logicalShards } = options
  const where = options.entityName ? ` of ${options.entityName}` : ''
  let shard: number
  if ('shard' in rule) {
    shard = rule.shard
  } else if ('sameShardAs' in rule) {
    const ref = rule.sameShardAs
    const parent =
      typeof ref === 'function' ? ref(entity) : (entity as Record<string, unknown>)[ref]
    if (parent === null || parent === undefined) {
      throw new MissingShardKeyError(
        `The parent ID${where} (${typeof ref === 'function' ? 'sameShardAs function' : `field '${ref}'`}) is missing: the row's shard comes from it. Set it before saving.`,
      )
    }
    shard = layout.shardOf(toBigInt(parent, `Parent ID${where}`))
  } else {
    const ref = rule.shardBy
    const key = typeof ref === 'function' ? ref(entity) : (entity as Record<string, unknown>)[ref]
    if (key === null || key === undefined) {
      throw new MissingShardKeyError(
        `The shard key${where} (${typeof ref === 'function' ? 'shardBy function' : `field '${ref}'`}) is missing: set it before saving, or give the ID yourself.`,
      )
    }
    if (typeof key !== 'bigint' && typeof key !== 'number' && typeof key !== 'string') {
      throw new InvalidArgumentError(
        `The shard key${where} must be a bigint, number or string, got ${typeof key}.`,
      )
    }
    shard = shardForKey(key, logicalShards, rule.stringKeys)
  }
  layout.checkShard(shard)
  if (shard >= logicalShards) {
    throw new ShardOutOfRangeError(
      shard,
      `Shard ${shard}${where} is outside the ${logicalShards} logical shards in use.`,
    )
  }
  return shard
}

function checkLogicalShards(count: number): number {
  if (!Number.isSafeInteger(count) || count < 1) {
    throw new InvalidArgumentError(`logicalShards must be a positive integer, got ${count}.`)
  }
  return count
}
