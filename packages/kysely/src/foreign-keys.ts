/**
 * The rules checked against the database's foreign keys, the only place a Kysely application
 * declares which column holds which table's ID.
 */
import { InvalidShardRuleError, shardByOnShardedIdError } from '@shardflake/core'
import {
  CompiledQuery,
  type DatabaseConnection,
  type DialectAdapter,
  MysqlAdapter,
  PostgresAdapter,
} from 'kysely'
import type { TableSpec } from './tables'

interface ForeignKey {
  readonly constraint_name: string
  readonly table_name: string
  readonly column_name: string
  readonly referenced_table: string
  readonly referenced_column: string
}

// Single-column foreign keys of the tables on the search path; regclass prints a table without
// its schema when the search path finds it, as queries name it.
const POSTGRES = `SELECT c.conname AS constraint_name, c.conrelid::regclass::text AS table_name,
  a.attname AS column_name, c.confrelid::regclass::text AS referenced_table,
  r.attname AS referenced_column
FROM pg_catalog.pg_constraint c
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
JOIN pg_catalog.pg_attribute r ON r.attrelid = c.confrelid AND r.attnum = c.confkey[1]
WHERE c.contype = 'f' AND cardinality(c.conkey) = 1`

const MYSQL = `SELECT CONSTRAINT_NAME AS constraint_name, TABLE_NAME AS table_name,
  COLUMN_NAME AS column_name, REFERENCED_TABLE_NAME AS referenced_table,
  REFERENCED_COLUMN_NAME AS referenced_column
FROM information_schema.KEY_COLUMN_USAGE
WHERE TABLE_SCHEMA = DATABASE() AND REFERENCED_TABLE_NAME IS NOT NULL`

/**
 * Refuses rules the foreign keys contradict, before any row is written:
 * - `shardBy` on a column that references a declared table's key: its value is a sharded ID,
 *   whose modulo would read the ID's low bits (`InvalidShardRuleError` naming `sameShardAs`);
 * - `sameShardAs` on a column that references a table not declared in `tables`: its key is not
 *   known to be a sharded ID, and an auto-increment key would put every child on shard 0.
 * Only PostgreSQL and MySQL/MariaDB are read; tables that do not exist yet are passed over.
 */
export async function checkForeignKeys(
  connection: DatabaseConnection,
  adapter: DialectAdapter,
  lookup: (name: string) => TableSpec | undefined,
): Promise<void> {
  const sql =
    adapter instanceof PostgresAdapter
      ? POSTGRES
      : adapter instanceof MysqlAdapter
        ? MYSQL
        : undefined
  if (!sql) return
  const { rows } = await connection.executeQuery<ForeignKey>(CompiledQuery.raw(sql))
  const columnsPerConstraint = new Map<string, number>()
  for (const key of rows) {
    const id = `${key.table_name}.${key.constraint_name}`
    columnsPerConstraint.set(id, (columnsPerConstraint.get(id) ?? 0) + 1)
  }
  for (const key of rows) {
    if (columnsPerConstraint.get(`${key.table_name}.${key.constraint_name}`) !== 1) continue
    const spec = lookup(key.table_name)
    if (!spec) continue
    const { rule } = spec
    const parent = lookup(key.referenced_table)
    const parentIsSharded = parent !== undefined && parent.column === key.referenced_column
    if ('shardBy' in rule && rule.shardBy === key.column_name && parentIsSharded) {
      throw shardByOnShardedIdError(spec.name, key.column_name, parent.name)
    }
    if ('sameShardAs' in rule && rule.sameShardAs === key.column_name && !parentIsSharded) {
      throw new InvalidShardRuleError(
        `${spec.label}: '${key.column_name}' references ${key.referenced_table}.${key.referenced_column}, which is not a sharded key declared in shardedIds({ tables }), so its values carry no shard to share (an auto-increment key would put every row on shard 0). Declare ${key.referenced_table} in tables, or use { shardBy: '${key.column_name}' } to use its value as a plain key.`,
      )
    }
  }
}
