import mysql from 'mysql2/promise'
import pg from 'pg'

/** The two server families the suites run on. */
export type Dialect = 'postgres' | 'mysql'

/**
 * SQL run outside the code under test: the suites verify every write through this.
 * BIGINT values come back as decimal strings.
 */
export interface RawDatabase {
  readonly dialect: Dialect
  /** The connection URL of this database (for the ORM under test). */
  readonly url: string
  query(sql: string, params?: readonly unknown[]): Promise<Record<string, unknown>[]>
  close(): Promise<void>
}

/** `PG_URL` (default `postgres://postgres@127.0.0.1:5432/test`), pointed at `database`. */
export function postgresUrl(database?: string): string {
  const url = new URL(process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test')
  if (database) url.pathname = `/${database}`
  return url.toString()
}

/** `MYSQL_URL` (default `mysql://root@127.0.0.1:3306/test`), pointed at `database`. */
export function mysqlUrl(database?: string): string {
  const url = new URL(process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test')
  if (database) url.pathname = `/${database}`
  return url.toString()
}

const SAFE_NAME = /^[a-z_][a-z0-9_]{0,62}$/

/**
 * Drops and creates database `name` on the server of `dialect` and returns a raw connection to
 * it. Give every test file its own name so files can run in parallel.
 */
export async function freshDatabase(dialect: Dialect, name: string): Promise<RawDatabase> {
  if (!SAFE_NAME.test(name)) throw new Error(`Not a safe database name: ${name}`)
  return dialect === 'postgres' ? freshPostgres(name) : freshMysql(name)
}

async function freshPostgres(name: string): Promise<RawDatabase> {
  const admin = new pg.Client({ connectionString: postgresUrl() })
  await admin.connect()
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
    await admin.query(`CREATE DATABASE "${name}"`)
  } finally {
    await admin.end()
  }
  const url = postgresUrl(name)
  const pool = new pg.Pool({ connectionString: url, max: 4 })
  return {
    dialect: 'postgres',
    url,
    async query(sql, params = []) {
      return (await pool.query(sql, [...params])).rows
    },
    close: () => pool.end(),
  }
}

async function freshMysql(name: string): Promise<RawDatabase> {
  const admin = await mysql.createConnection({ uri: mysqlUrl() })
  try {
    await admin.query(`DROP DATABASE IF EXISTS \`${name}\``)
    await admin.query(`CREATE DATABASE \`${name}\``)
  } finally {
    await admin.end()
  }
  const url = mysqlUrl(name)
  const pool = mysql.createPool({
    uri: url,
    connectionLimit: 4,
    supportBigNumbers: true,
    bigNumberStrings: true,
    multipleStatements: true,
  })
  return {
    dialect: 'mysql',
    url,
    async query(sql, params = []) {
      const [rows] = await pool.query(sql, [...params])
      return Array.isArray(rows) ? (rows as Record<string, unknown>[]) : []
    },
    close: () => pool.end(),
  }
}
