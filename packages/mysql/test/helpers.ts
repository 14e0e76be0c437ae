import mysql, { type Pool, type PoolOptions } from 'mysql2/promise'

/** The shared MariaDB/MySQL server of the tests. */
export const MYSQL_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test'

/** A pool with BIGINT as strings (what every shardflake pool needs). */
export function createPool(url = MYSQL_URL, extra: PoolOptions = {}): Pool {
  return mysql.createPool({
    uri: url,
    supportBigNumbers: true,
    bigNumberStrings: true,
    connectionLimit: 8,
    ...extra,
  })
}

/** Runs raw SQL and returns the rows. */
export async function rows<T = Record<string, unknown>>(
  pool: Pool,
  sql: string,
  params: unknown[] = [],
): Promise<T[]> {
  const [result] = await pool.query(sql, params)
  return result as T[]
}

/** Drops every database whose name starts with `prefix` (the test's own). */
export async function dropDatabases(pool: Pool, prefix: string): Promise<void> {
  if (!/^sf_my_[a-z0-9_]+$/.test(prefix)) throw new Error(`refusing prefix ${prefix}`)
  const names = await rows<{ name: string }>(
    pool,
    'SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?',
    [`${prefix.replace(/_/g, '\\_')}%`],
  )
  for (const { name } of names) await pool.query(`DROP DATABASE IF EXISTS \`${name}\``)
}

/** Counts values and distinct values. */
export function distinct(ids: readonly bigint[]): { total: number; distinct: number } {
  return { total: ids.length, distinct: new Set(ids).size }
}

/** A second MariaDB server for a test file: the throwaway servers of the conformance suite. */
export { startMariadb, type ThrowawayServer } from '@shardflake/conformance'

/** A tag of this test run, so that two runs at once use different databases. */
export const RUN = `${process.pid.toString(36)}${Math.floor(Math.random() * 36 ** 2).toString(36)}`

/** Runs a Ddl's statements in order on one connection (they set and restore its sql_mode). */
export async function runDdl(pool: Pool, ddl: { statements: readonly string[] }): Promise<void> {
  const connection = await pool.getConnection()
  try {
    for (const statement of ddl.statements) await connection.query(statement)
  } finally {
    connection.release()
  }
}

/** The SQLSTATE of a driver error. */
export async function sqlStateOf(promise: Promise<unknown>): Promise<string | undefined> {
  try {
    await promise
    return undefined
  } catch (error) {
    return (error as { sqlState?: string }).sqlState
  }
}
