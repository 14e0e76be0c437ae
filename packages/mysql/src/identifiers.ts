import { checkIdentifier } from '@shardflake/core'

// The validation is core's (1-63 characters of a-z, 0-9 and `_`); MySQL quotes with backquotes.
export { checkIdentifier }

/** A validated identifier in backquotes. @throws InvalidIdentifierError */
export function quoteIdentifier(kind: string, value: string): string {
  return `\`${checkIdentifier(kind, value)}\``
}

/**
 * The database of a logical shard: `${prefix}${shard}` (`shard_5`).
 * @default prefix 'shard_'
 * @throws InvalidIdentifierError
 */
export function shardSchemaName(shard: number, prefix = 'shard_'): string {
  return checkIdentifier('database', `${prefix}${shard}`)
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
