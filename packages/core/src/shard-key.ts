import { InvalidArgumentError, MissingShardKeyError } from './errors'
import { toBigInt } from './id-value'

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
  // A key is not an ID: any integer works, however wide (a digit string from a DECIMAL column).
  const value =
    typeof key === 'string' && DIGITS.test(key.trim())
      ? BigInt(key.trim())
      : typeof key === 'bigint'
        ? key
        : toBigInt(key, 'Shard key')
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
 * @throws MissingShardKeyError for `null`, `undefined`, and a string that is empty or only
 *   white space (what a form or a NOT NULL column with a `''` default hands over when no key
 *   was set).
 */
export function shardForKey(
  key: ShardKey | null | undefined,
  logicalShards: number,
  mode: StringKeyMode = 'auto',
): number {
  if (key === null || key === undefined) {
    throw new MissingShardKeyError('The shard key is missing (null or undefined).')
  }
  if (typeof key === 'string' && key.trim() === '') {
    throw new MissingShardKeyError(
      `The shard key is ${key === '' ? 'an empty string' : 'blank (only white space)'}: every row without a key would land on one shard. Set the key before saving.`,
    )
  }
  if (typeof key === 'string' && (mode === 'hash' || !DIGITS.test(key))) {
    return hashShard(key, logicalShards)
  }
  return integerShard(key, logicalShards)
}

function checkLogicalShards(count: number): number {
  if (!Number.isSafeInteger(count) || count < 1) {
    throw new InvalidArgumentError(`logicalShards must be a positive integer, got ${count}.`)
  }
  return count
}
