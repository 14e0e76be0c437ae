import mysql from 'mysql2/promise'
import pg from 'pg'
import { runTag } from './run-tag'

/** The two server families the suites run on. */
export type Dialect = 'postgres' | 'mysql'

/**
 * SQL run outside the code under test: the suites verify every write through this.
 * BIGINT values come back as decimal strings.
 */
export interface RawDatabase {
  readonly dialect: Dialect
  /** The database's name: the name asked for, suffixed with {@link runTag}. */
  readonly name: string
  /** The connection URL of this database (for the ORM under test). */
  readonly url: string
  query(sql: string, params?: readonly unknown[]): Promise<Record<string, unknown>[]>
  /** Ends the connections and drops the database (close the ORM first). */
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
 * Creates database `${base}_${runTag()}` on the server of `dialect` and returns a raw connection
 * to it; `close()` drops it. The run tag keeps two runs (and two files, given their own `base`)
 * apart, so nothing shared is ever dropped.
 */
export async function freshDatabase(dialect: Dialect, base: string): Promise<RawDatabase> {
  const name = `${base}_${runTag()}`
  if (!SAFE_NAME.test(name)) {
    throw new Error(
      `Not a safe database name: ${name} (lowercase letters, digits and _, at most 63 characters with the run tag: shorten ${JSON.stringify(base)}).`,
    )
  }
  return dialect === 'postgres' ? freshPostgres(name) : freshMysql(name)
}

async function postgresAdmin(statement: string): Promise<void> {
  const admin = new pg.Client({ connectionString: postgresUrl() })
  await admin.connect()
  try {
    await admin.query(statement)
  } finally {
    await admin.end()
  }
}

/** Waits (up to 5 s) until no session is connected to database `name`. */
async function waitUntilUnused(name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: postgresUrl() })
  await admin.connect()
  try {
    for (let waited = 0; waited < 5000; waited += 50) {
      const { rows } = await admin.query(
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1',
        [name],
      )
      if ((rows[0] as { n: number }).n === 0) return
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  } finally {
    await admin.end()
  }
}

async function freshPostgres(name: string): Promise<RawDatabase> {
  // The name is this run's own: dropping it WITH (FORCE) cannot touch another run's database.
  await postgresAdmin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
  await postgresAdmin(`CREATE DATABASE "${name}"`)
  const url = postgresUrl(name)
  const pool = new pg.Pool({ connectionString: url, max: 4 })
  pool.on('error', () => undefined)
  return {
    dialect: 'postgres',
    name,
    url,
    async query(sql, params = []) {
      return (await pool.query(sql, [...params])).rows
    },
    async close() {
      await pool.end()
      // Pools of the ORM and the source may still be ending their connections: give them a few
      // seconds to leave, so that FORCE does not terminate a connection someone still listens to.
      await waitUntilUnused(name)
      await postgresAdmin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
    },
  }
}

async function mysqlAdmin(statement: string): Promise<void> {
  const admin = await mysql.createConnection({ uri: mysqlUrl() })
  try {
    await admin.query(statement)
  } finally {
    await admin.end()
  }
}

async function freshMysql(name: string): Promise<RawDatabase> {
  await mysqlAdmin(`DROP DATABASE IF EXISTS \`${name}\``)
  await mysqlAdmin(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4`)
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
    name,
    url,
    async query(sql, params = []) {
      const [rows] = await pool.query(sql, [...params])
      return Array.isArray(rows) ? (rows as Record<string, unknown>[]) : []
    },
    async close() {
      await pool.end()
      await mysqlAdmin(`DROP DATABASE IF EXISTS \`${name}\``)
    },
  }
}
