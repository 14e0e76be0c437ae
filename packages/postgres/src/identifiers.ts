import { InvalidIdentifierError } from '@shardflake/core'

const PLAIN = /^[a-z_][a-z0-9_]{0,62}$/

/**
 * Validates a schema, table or column name: 1-63 characters of `a-z`, `0-9` and `_`, starting
 * with a letter or `_`. Anything else (quotes, dots, spaces, upper case) is refused, never
 * interpolated.
 * @throws InvalidIdentifierError
 */
export function checkIdentifier(kind: string, value: unknown): string {
  if (typeof value !== 'string' || !PLAIN.test(value)) {
    throw new InvalidIdentifierError(kind, String(value))
  }
  return value
}

/** A validated identifier in double quotes. @throws InvalidIdentifierError */
export function quoteIdent(kind: string, value: unknown): string {
  return `"${checkIdentifier(kind, value)}"`
}

/**
 * A validated, quoted, possibly schema-qualified table name: `"table"` or `"schema"."table"`.
 * @throws InvalidIdentifierError
 */
export function quoteQualified(kind: string, value: string): string {
  const parts = value.split('.')
  if (parts.length > 2) throw new InvalidIdentifierError(kind, value)
  return parts.map((part) => quoteIdent(kind, part)).join('.')
}

/** A SQL string literal (single quotes doubled). Only used for values we produced. */
export function quoteLiteral(value: string): string {
  return `'${value.replaceAll("'", "''")}'`
}
