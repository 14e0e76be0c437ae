import mysql, { type Pool, type PoolConnection, type RowDataPacket } from 'mysql2/promise'
import type { RowTally, Scenario } from './scenario'

/** The user the sources connect as, so the fault loops kill only their sessions. */
export const SOURCE_USER = 'faults_source'

/** A pool that returns BIGINT as strings (what the sources require), with short connect waits. */
export function mysqlPool(port: number, user = 'root', connectionLimit = 4): Pool {
  return mysql.createPool({
    host: '127.0.0.1',
    port,
    user,
    connectionLimit,
    connectTimeout: 2_000,
    supportBigNumbers: true,
    bigNumberStrings: true,
    multipleStatements: false,
  })
}

/** `mysql://faults_source@127.0.0.1:<port>` for a source that opens its own pool. */
export const sourceUrl = (port: number) => `mysql://${SOURCE_USER}@127.0.0.1:${port}`

/** Creates {@link SOURCE_USER} (no password, every privilege) and the rows table. */
export async function prepareServer(admin: Pool): Promise<void> {
  await admin.query(`CREATE USER IF NOT EXISTS '${SOURCE_USER}'@'127.0.0.1'`)
  await admin.query(`GRANT ALL ON *.* TO '${SOURCE_USER}'@'127.0.0.1'`)
  await admin.query('CREATE DATABASE IF NOT EXISTS faults')
  await admin.query(
    'CREATE TABLE IF NOT EXISTS faults.`rows` (id BIGINT UNSIGNED PRIMARY KEY, shard INT NOT NULL) ENGINE=InnoDB',
  )
}

/** The pools of a scenario on one MariaDB server. */
export interface MariadbPools {
  /** `root`, 4 connections: installers, the KILL loops, counting rows. */
  readonly admin: Pool
  /** {@link SOURCE_USER}, 8 connections: for the sources. */
  readonly source: Pool
  /** `root`, 3 connections: for the row writers. */
  readonly writer: Pool
  /** Ends the three. */
  end(): Promise<void>
}

/** Prepares the MariaDB server on `port` ({@link prepareServer}) and opens its pools. */
export async function mariadbPools(port: number): Promise<MariadbPools> {
  const admin = mysqlPool(port)
  await prepareServer(admin)
  const source = mysqlPool(port, SOURCE_USER, 8)
  const writer = mysqlPool(port, 'root', 3)
  return {
    admin,
    source,
    writer,
    end: async () => {
      await Promise.all([admin.end(), source.end(), writer.end()])
    },
  }
}

/**
 * A row writer into faults.rows of the server of `pools` ({@link mysqlRowWriter}), whose rows
 * `scenario` tallies as `table`.
 */
export function mysqlRows(scenario: Scenario, pools: MariadbPools, table: string) {
  const tally = scenario.rowTally(table, (ids) => countPresentRows(pools.admin, ids))
  return mysqlRowWriter(pools.writer, tally)
}

/**
 * Writes each acknowledged batch as rows in one InnoDB transaction
 * (innodb_flush_log_at_trx_commit = 1), tallied in `tally`.
 */
export function mysqlRowWriter(writer: Pool, tally: RowTally) {
  return async (ids: bigint[], shard: number) => {
    let connection: PoolConnection | undefined
    try {
      connection = await writer.getConnection()
      await connection.beginTransaction()
      await connection.query('INSERT INTO faults.`rows` (id, shard) VALUES ?', [
        ids.map((id) => [String(id), shard]),
      ])
      await connection.commit()
      tally.committed.push(...ids)
    } catch {
      tally.uncertain++
      // A connection whose server died is not given back to the pool.
      connection?.destroy()
      connection = undefined
    } finally {
      connection?.release()
    }
  }
}

/** How many of `ids` are rows of faults.rows. */
export async function countPresentRows(admin: Pool, ids: readonly bigint[]): Promise<number> {
  let present = 0
  for (let at = 0; at < ids.length; at += 5_000) {
    const chunk = ids.slice(at, at + 5_000).map(String)
    const [rows] = await admin.query<RowDataPacket[]>(
      'SELECT count(*) AS n FROM faults.`rows` WHERE id IN (?)',
      [chunk],
    )
    present += Number(rows[0]?.n ?? 0)
  }
  return present
}

/**
 * `KILL QUERY` of a running statement and `KILL CONNECTION` of a session of the sources, in
 * loops, until the scenario stops.
 */
export function killSessions(
  scenario: Scenario,
  admin: Pool,
  queryEveryMs = 40,
  connectionEveryMs = 150,
) {
  const pick = async (running: boolean) => {
    const [rows] = await admin.query<RowDataPacket[]>(
      `SELECT id FROM information_schema.processlist WHERE user = ? AND id <> CONNECTION_ID()${
        running ? " AND command = 'Query'" : ''
      }`,
      [SOURCE_USER],
    )
    return rows[Math.floor(Math.random() * rows.length)]?.id as number | undefined
  }
  const kill = (what: 'QUERY' | 'CONNECTION') => async () => {
    const id = await pick(what === 'QUERY')
    if (id === undefined) return 0
    try {
      await admin.query(`KILL ${what} ${Number(id)}`)
      return 1
    } catch (error) {
      // ER_NO_SUCH_THREAD: the session ended on its own meanwhile.
      if ((error as { errno?: number }).errno === 1094) return 0
      throw error
    }
  }
  scenario.every(queryEveryMs, 'KILL QUERY', kill('QUERY'))
  scenario.every(connectionEveryMs, 'KILL CONNECTION', kill('CONNECTION'))
}
