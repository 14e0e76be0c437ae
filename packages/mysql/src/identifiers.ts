import { InvalidIdentifierError } from '@shardflake/core'

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/

/**
 * Throws unless `value` is a plain lower-case identifier (1-63 characters of a-z, 0-9 and `_`,
 * starting with a letter or `_`), the only names the generated SQL accepts.
 * @throws InvalidIdentifierError
 */
export function checkIdentifier(kind: string, value: string): string {
  if (typeof value !== 'string' || !IDENTIFIER.test(value)) {
    throw new InvalidIdentifierError(kind, String(value))
  }
  return value
}

/** A validated identifier in backquotes. @throws InvalidIdentifierError */
export function quoteIdentifier(kind: string, value: string): string {
  return `\`${checkIdentifier(kind, value)}\``
}

/**
 * Validates a database-name prefix: the database of shard `n` is `${prefix}${n}`, so the prefix
 * plus the longest shard number must still be an identifier.
 * @throws InvalidIdentifierError
 */
export function checkSchemaPrefix(prefix: string, largestShard: number): string {
  checkIdentifier('schema prefix', prefix)
  checkIdentifier('database', `${prefix}${largestShard}`)
  return prefix
}
