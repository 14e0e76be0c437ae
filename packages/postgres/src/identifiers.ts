import { checkIdentifier, InvalidIdentifierError } from '@shardflake/core'

export { checkIdentifier }

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
