import { InvalidIdentifierError } from './errors'
import { describeValue } from './known-options'

const PLAIN = /^[a-z_][a-z0-9_]{0,62}$/

/**
 * Validates a schema, database, table or column name for generated SQL: 1-63 characters of
 * `a-z`, `0-9` and `_`, starting with a letter or `_`. Anything else (quotes, dots, spaces, upper
 * case) is refused, never interpolated. Each SQL dialect quotes what passes its own way.
 *
 * @example
 * ```ts
 * checkIdentifier('schema', 'shard_5') // 'shard_5'
 * checkIdentifier('table', 'posts"; DROP TABLE users; --') // throws InvalidIdentifierError
 * ```
 * @throws InvalidIdentifierError
 */
export function checkIdentifier(kind: string, value: unknown): string {
  if (typeof value !== 'string' || !PLAIN.test(value)) {
    throw new InvalidIdentifierError(kind, typeof value === 'string' ? value : describeValue(value))
  }
  return value
}
