import { InvalidArgumentError, MissingShardKeyError, UnsafeNumberError } from './errors'
import { describeValue } from './known-options'

/** A value a row is sharded by: a user id (integer) or any string key. */
export type ShardKey = bigint | number | string

/**
 * How a string shard key is read.
 * - `'auto'`: a string of ASCII digits with an optional leading `-` is the integer it spells
 *   (ORMs and drivers hand BIGINT columns to JS as strings, and `'31341'` must land where
 *   `31341n` does; `'007'` is 7); any other string is hashed (`'+5'`, `' 5'`, `'5.0'`, `'1e3'`).
 * - `'hash'`: every string is hashed, digits or not (zip codes, phone numbers).
 */
export type StringKeyMode = 'auto' | 'hash'

/** The longest string key, in characters (Unicode code points). */
export const MAX_KEY_LENGTH = 1024

/** `Number.MIN_SAFE_INTEGER` and `Number.MAX_SAFE_INTEGER` as bigints. */
const MIN_SAFE = BigInt(Number.MIN_SAFE_INTEGER)
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER)

/** What `'auto'` reads as an integer: ASCII digits, an optional leading minus, nothing else. */
const DIGITS = /^-?[0-9]+$/
/**
 * Blank: empty, or only the white space JavaScript's `String.prototype.trim` removes (listed, so
 * that the SQL implementations can use the same set).
 */
const BLANK = /^[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]*$/
/** U+0000 (PostgreSQL text cannot hold it) or a lone surrogate (not Unicode text). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing U+0000 is the point
const NOT_TEXT = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

/**
 * The logical shard of an integer key: `key mod logicalShards`, always non-negative
 * (Instagram: user 31341 with 2000 logical shards lands on shard 1341; -5 of 64 lands on 59).
 * An integer key may be of any width (a `bigint`, a safe `number`, or a string of decimal digits
 * read as in `'auto'` mode): `'123456789012345678901234567890'` is placed by its value, like
 * `31341n`.
 *
 * @example
 * ```ts
 * integerShard(31341n, 2000) // 1341
 * ```
 * @throws InvalidArgumentError for a string that is not decimal digits with an optional
 *   leading `-`.
 * @throws UnsafeNumberError for a `number` that is not a safe integer.
 */
export function integerShard(key: bigint | number | string, logicalShards: number): number {
  const count = checkLogicalShards(logicalShards)
  // Keys within ±(2^53 - 1) (every user id in practice): exact in a double, so no BigInt division.
  const exact = exactNumber(key)
  if (exact !== undefined) return ((exact % count) + count) % count
  const value = readIntegerKey(key)
  const shards = BigInt(count)
  return Number(((value % shards) + shards) % shards)
}

/**
 * An integer key's value when a double holds it exactly: a safe number or bigint, a short digit
 * string; `undefined` otherwise.
 */
function exactNumber(key: bigint | number | string): number | undefined {
  if (typeof key === 'number') return Number.isSafeInteger(key) ? key : undefined
  if (typeof key === 'bigint') return key >= MIN_SAFE && key <= MAX_SAFE ? Number(key) : undefined
  return typeof key === 'string' ? shortInteger(key) : undefined
}

function readIntegerKey(key: bigint | number | string): bigint {
  if (typeof key === 'bigint') {
    // The same bound as text keys, so that SQL (which reads keys as text) agrees on every key.
    if (key.toString().length > MAX_KEY_LENGTH) {
      throw new InvalidArgumentError(
        `The shard key is a ${key.toString().length}-digit integer; shard keys are at most ${MAX_KEY_LENGTH} characters.`,
      )
    }
    return key
  }
  if (typeof key === 'number') {
    if (!Number.isSafeInteger(key)) throw new UnsafeNumberError('Shard key', key)
    return BigInt(key)
  }
  if (typeof key === 'string' && DIGITS.test(key)) return BigInt(key)
  throw new InvalidArgumentError(
    `An integer shard key must be a bigint, a safe integer number or a string of decimal digits with an optional leading '-', got ${typeof key === 'string' ? JSON.stringify(key) : typeof key}.`,
  )
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

/** FNV-1a's 32-bit offset basis (as a signed 32-bit integer, so the hash stays one) and prime. */
const FNV_OFFSET = 0x811c9dc5 | 0
const FNV_PRIME = 0x01000193

/**
 * 32-bit FNV-1a of the UTF-8 bytes of `text`, as an unsigned integer. The bytes are those
 * `TextEncoder` gives (a lone surrogate counts as U+FFFD), read off the string as it is walked,
 * without encoding it first.
 * @throws InvalidArgumentError when `text` is not a string.
 */
export function fnv1a32(text: string): number {
  if (typeof text !== 'string') {
    throw new InvalidArgumentError(`A hashed key must be a string, got ${describeValue(text)}.`)
  }
  let hash = FNV_OFFSET
  const length = text.length
  for (let index = 0; index < length; index++) {
    let code = text.charCodeAt(index)
    if (code < 0x80) {
      hash = Math.imul(hash ^ code, FNV_PRIME)
      continue
    }
    if (code < 0x800) {
      hash = Math.imul(hash ^ (0xc0 | (code >> 6)), FNV_PRIME)
    } else {
      if (code >= 0xd800 && code <= 0xdfff) {
        const next = index + 1 < length ? text.charCodeAt(index + 1) : 0
        if (code <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
          // A surrogate pair: one code point past U+FFFF, four bytes.
          code = 0x10000 + ((code - 0xd800) << 10) + (next - 0xdc00)
          index++
          hash = Math.imul(hash ^ (0xf0 | (code >> 18)), FNV_PRIME)
          hash = Math.imul(hash ^ (0x80 | ((code >> 12) & 0x3f)), FNV_PRIME)
        } else {
          code = 0xfffd
        }
      }
      if (code < 0x10000) hash = Math.imul(hash ^ (0xe0 | (code >> 12)), FNV_PRIME)
      hash = Math.imul(hash ^ (0x80 | ((code >> 6) & 0x3f)), FNV_PRIME)
    }
    hash = Math.imul(hash ^ (0x80 | (code & 0x3f)), FNV_PRIME)
  }
  return hash >>> 0
}

/**
 * The logical shard of any key: integers (and digit strings, in `'auto'` mode) by modulo,
 * other strings by {@link hashShard}. The PostgreSQL function `shard_for_key` and the MySQL
 * function `shard_for_key` (and `generate_id`) installed by shardflake accept the same keys,
 * refuse the same keys and give the same shard.
 *
 * The keys, in order of the checks:
 * 1. `null`, `undefined`: missing.
 * 2. A string longer than 1024 characters (code points): refused.
 * 3. A string that is empty or only white space (the characters `String.prototype.trim`
 *    removes): missing.
 * 4. A string holding U+0000 or a lone surrogate: refused (not text a database column holds).
 * 5. In `'auto'` mode, ASCII digits with an optional leading `-` (`'007'`, `'-5'`): the integer.
 * 6. Any other string (`'+5'`, `' 5'`, `'acme'`, `'ACME'`): 32-bit FNV-1a of its UTF-8 bytes.
 * 7. Integers (bigint, safe `number`, digit strings) of any width: `key mod logicalShards` made
 *    non-negative (a 30-digit key is placed by its value, not refused).
 *
 * @example
 * ```ts
 * shardForKey(-5n, 64) // 59
 * shardForKey('18446744073709551615', 64) // 63
 * shardForKey('123456789012345678901234567890', 2000) // 1890
 * shardForKey('acme', 64) === shardForKey('ACME', 64) // false: normalize keys before
 * ```
 * @default mode `'auto'`
 * @throws MissingShardKeyError for `null`, `undefined`, and a string that is empty or only
 *   white space (what a form or a NOT NULL column with a `''` default hands over when no key
 *   was set).
 * @throws InvalidArgumentError for a key outside the domain above, or an unknown mode.
 * @throws UnsafeNumberError for a `number` that is not a safe integer.
 */
export function shardForKey(
  key: ShardKey | null | undefined,
  logicalShards: number,
  mode: StringKeyMode = 'auto',
): number {
  if (mode !== 'auto' && mode !== 'hash') {
    throw new InvalidArgumentError(
      `The string key mode must be 'auto' or 'hash', got ${describeValue(mode)}.`,
    )
  }
  if (key === null || key === undefined) {
    throw new MissingShardKeyError('The shard key is missing (null or undefined).')
  }
  if (typeof key === 'string') {
    const integer = mode === 'auto' ? shortInteger(key) : undefined
    if (integer !== undefined) return integerShard(integer, logicalShards)
    checkStringKey(key)
    if (mode === 'hash' || !DIGITS.test(key)) return hashShard(key, logicalShards)
  }
  return integerShard(key, logicalShards)
}

/**
 * The value of a string of at most 15 characters that `'auto'` reads as an integer (ASCII
 * digits after an optional '-'), exact in a double; `undefined` for any other string.
 */
function shortInteger(key: string): number | undefined {
  const length = key.length
  if (length === 0 || length > 15) return undefined
  let index = key.charCodeAt(0) === 0x2d ? 1 : 0
  if (index === length) return undefined
  for (; index < length; index++) {
    const code = key.charCodeAt(index)
    if (code < 0x30 || code > 0x39) return undefined
  }
  return Number(key)
}

function checkStringKey(key: string): void {
  if (key.length > MAX_KEY_LENGTH && [...key].length > MAX_KEY_LENGTH) {
    throw new InvalidArgumentError(
      `The shard key is ${[...key].length} characters long; shard keys are at most ${MAX_KEY_LENGTH}. Shard by a shorter field (an id, a tenant name).`,
    )
  }
  if (BLANK.test(key)) {
    throw new MissingShardKeyError(
      `The shard key is ${key === '' ? 'an empty string' : 'blank (only white space)'}: every row without a key would land on one shard. Set the key before saving.`,
    )
  }
  if (NOT_TEXT.test(key)) {
    throw new InvalidArgumentError(
      `The shard key ${JSON.stringify(key.slice(0, 40))} holds U+0000 or a lone surrogate: it is not text a database column holds, and would hash differently in each. Remove the character before using the key.`,
    )
  }
}

function checkLogicalShards(count: number): number {
  if (!Number.isSafeInteger(count) || count < 1) {
    throw new InvalidArgumentError(
      `logicalShards must be a positive integer, got ${describeValue(count)}.`,
    )
  }
  return count
}
