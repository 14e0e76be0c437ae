import { checkIdentifier } from '@shardflake/core'

// The validation is core's (1-63 characters of a-z, 0-9 and `_`); MySQL quotes with backquotes.
export { checkIdentifier }

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
