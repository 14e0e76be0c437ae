/**
 * Where a shard key must land, computed here from the rule as documented and NOT with core's
 * functions, so a suite that compares the two catches a change on either side.
 */

/**
 * Shard keys of every kind, as text (the `keyed.shard_key` column): integers, digit strings with
 * leading zeros and signs, integers beyond 2^53, at the 64-bit limits and wider, strings that only look numeric (hashed),
 * and non-ASCII strings (hashed over their UTF-8 bytes; kept within the Basic Multilingual Plane,
 * which every MySQL connection charset carries).
 */
export const ROUTING_KEYS: readonly string[] = [
  '0',
  '1',
  '63',
  '64',
  '31341',
  '-7',
  '007',
  String(Number.MAX_SAFE_INTEGER),
  '9007199254740993',
  '9223372036854775807',
  '18446744073709551615',
  '-9223372036854775808',
  '18446744073709551617',
  '123456789012345678901234567890',
  'acme.example',
  'ada@example.com',
  ' 42',
  '+5',
  '4e3',
  '12a',
  'Zürich',
  '東京',
]

const DIGITS = /^-?[0-9]+$/

/**
 * The logical shard of `key` under the shard-key rule: a decimal integer (optionally negative)
 * is `key mod logicalShards`, never negative; any other string is the 32-bit FNV-1a hash of its
 * UTF-8 bytes, mod `logicalShards`.
 */
export function expectedShard(key: string, logicalShards: number): number {
  const n = BigInt(logicalShards)
  if (DIGITS.test(key)) return Number(((BigInt(key) % n) + n) % n)
  let hash = 0x811c9dc5n
  for (const byte of Buffer.from(key, 'utf8')) {
    hash = ((hash ^ BigInt(byte)) * 0x01000193n) % 0x100000000n
  }
  return Number(hash % n)
}

/** `error` itself or the first error in its `cause` chain that is a `type`; else `error`. */
export function findError<T>(error: unknown, type: new (...args: never[]) => T): unknown {
  let current: unknown = error
  for (let depth = 0; depth < 8 && current; depth++) {
    if (current instanceof type) return current
    current = (current as { cause?: unknown }).cause
  }
  return error
}
