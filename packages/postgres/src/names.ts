import {
  checkIdentifier,
  checkKnownOptions,
  describeValue,
  InvalidArgumentError,
  InvalidIdentifierError,
} from '@shardflake/core'

export { checkIdentifier }

/** A validated identifier in double quotes. @throws InvalidIdentifierError */
export function quoteIdentifier(kind: string, value: unknown): string {
  return `"${checkIdentifier(kind, value)}"`
}

/**
 * A validated, quoted, possibly schema-qualified table name: `"table"` or `"schema"."table"`.
 * @throws InvalidIdentifierError
 */
export function quoteQualified(kind: string, value: string): string {
  if (typeof value !== 'string') throw new InvalidIdentifierError(kind, String(value))
  const parts = value.split('.')
  if (parts.length > 2) throw new InvalidIdentifierError(kind, value)
  return parts.map((part) => quoteIdentifier(kind, part)).join('.')
}

/** A SQL string literal (single quotes doubled). Only used for values we produced. */
export function quoteLiteral(value: string): string {
  return `'${value.replaceAll("'", "''")}'`
}

/**
 * The schema name of a logical shard: `prefix` + shard number (`shard_5`).
 * @throws InvalidIdentifierError
 */
export function shardSchemaName(shard: number, prefix = 'shard_'): string {
  return checkIdentifier('schema', `${prefix}${shard}`)
}

/**
 * The clause for a column definition: `DEFAULT "shard_5".next_id()`.
 *
 * @example
 * ```ts
 * await pool.query(`CREATE TABLE posts (id bigint PRIMARY KEY ${defaultClause(5)}, body text)`)
 * ```
 */
export function defaultClause(shard: number, options: { schemaPrefix?: string } = {}): string {
  checkKnownOptions('defaultClause options', options, ['schemaPrefix'])
  checkShardNumber(shard)
  return `DEFAULT ${quoteIdentifier('schema', shardSchemaName(shard, options.schemaPrefix))}.next_id()`
}

/**
 * `ALTER TABLE ... ALTER COLUMN ... SET DEFAULT "shard_5".next_id()` for an existing table.
 * @throws InvalidIdentifierError for a table or column name that is not a plain identifier.
 */
export function setDefaultSql(options: {
  /** `table` or `schema.table`. */
  table: string
  shard: number
  /** @default 'id' */
  column?: string
  schemaPrefix?: string
}): string {
  checkKnownOptions('setDefaultSql options', options, ['table', 'shard', 'column', 'schemaPrefix'])
  const table = quoteQualified('table', options.table)
  const column = quoteIdentifier('column', options.column ?? 'id')
  const clause = defaultClause(options.shard, { schemaPrefix: options.schemaPrefix })
  return `ALTER TABLE ${table} ALTER COLUMN ${column} SET ${clause}`
}

function checkShardNumber(shard: number): void {
  if (!Number.isSafeInteger(shard) || shard < 0) {
    throw new InvalidArgumentError(
      `A shard number must be an integer >= 0, got ${describeValue(shard)}.`,
    )
  }
}
