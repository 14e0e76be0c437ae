import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
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

/** A second MariaDB server started for a test file (another port, its own data directory). */
export interface ExtraServer {
  url: string
  port: number
  /** SIGSTOP: the server keeps its connections open and answers nothing. */
  pause(): void
  /** SIGCONT after {@link pause}. */
  resume(): void
  /** SIGKILL, as a crash: nothing is flushed or closed. */
  kill(): Promise<void>
  /** Starts the server again on the same data directory and port. */
  restart(): Promise<void>
  stop(): Promise<void>
}

async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}

/**
 * Starts a throw-away MariaDB server (`mariadb-install-db` + `mariadbd`) on a free port, with
 * grant tables skipped. `stop()` ends it (SIGTERM to the process this started) and removes its
 * data directory; `kill()` sends SIGKILL, `restart()` starts it again on the same data and port.
 */
export async function startMariadb(): Promise<ExtraServer> {
  const dir = mkdtempSync(join(tmpdir(), 'sf_my_srv_'))
  const data = join(dir, 'data')
  execFileSync('mariadb-install-db', [
    '--no-defaults',
    `--datadir=${data}`,
    '--user=root',
    '--auth-root-authentication-method=normal',
    '--skip-test-db',
  ])
  const port = await freePort()
  const url = `mysql://root@127.0.0.1:${port}/mysql`
  let child: ChildProcess
  let exited: Promise<void>
  const launch = async (): Promise<boolean> => {
    child = spawn(
      'mariadbd',
      [
        '--no-defaults',
        `--datadir=${data}`,
        '--user=root',
        `--port=${port}`,
        '--bind-address=127.0.0.1',
        `--socket=${join(dir, 'sock')}`,
        `--pid-file=${join(dir, 'pid')}`,
        '--skip-grant-tables',
        '--skip-log-bin',
        '--innodb-buffer-pool-size=16M',
        '--max-connections=100',
      ],
      { stdio: 'ignore' },
    )
    const started = child
    exited = new Promise<void>((resolve) => started.once('exit', () => resolve()))
    for (let i = 0; i < 150; i++) {
      try {
        const connection = await mysql.createConnection({ uri: url })
        await connection.query('SELECT 1')
        await connection.end()
        return true
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    }
    return false
  }
  const running = () => child.exitCode === null && child.signalCode === null
  const stop = async () => {
    if (running()) {
      child.kill('SIGCONT')
      child.kill('SIGTERM')
      await exited
    }
    rmSync(dir, { recursive: true, force: true })
  }
  if (!(await launch())) {
    await stop()
    throw new Error('The extra MariaDB server did not start.')
  }
  return {
    url,
    port,
    stop,
    pause: () => child.kill('SIGSTOP'),
    resume: () => child.kill('SIGCONT'),
    kill: async () => {
      child.kill('SIGKILL')
      await exited
    },
    restart: async () => {
      if (running()) throw new Error('The extra MariaDB server is still running.')
      if (!(await launch())) throw new Error('The extra MariaDB server did not start again.')
    },
  }
}

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
