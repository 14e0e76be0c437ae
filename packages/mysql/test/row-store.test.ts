import { CancelledError, InvalidArgumentError, TimedOutError } from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { mysqlRowStore } from '../src/index'
import { createPool, dropDatabases, MYSQL_URL, RUN, rows } from './helpers'

/**
 * The row store's statements have a deadline: a page blocked by a lock another session holds
 * (or by a server that stopped answering) fails the move typed and is killed on the server,
 * instead of stalling the move and the writes waiting on it.
 */
const PREFIX = 'sf_my_row_store_'
const DB = `${PREFIX}${RUN}`
let admin: Pool
let url: string
const table = { name: 'rs_posts' }
const range = { shards: [3], shift: 10, mask: 8191 }
const idOf = (sequence: number) => (BigInt(sequence) << 23n) | (3n << 10n) | 1n

beforeAll(async () => {
  admin = createPool()
  await dropDatabases(admin, PREFIX)
  await admin.query(`CREATE DATABASE \`${DB}\``)
  const parsed = new URL(MYSQL_URL)
  parsed.pathname = `/${DB}`
  url = parsed.toString()
  const pool = createPool(url, { connectionLimit: 1 })
  await pool.query(
    'CREATE TABLE rs_posts (id BIGINT PRIMARY KEY, title TEXT NOT NULL) ENGINE=InnoDB',
  )
  await pool.query('INSERT INTO rs_posts VALUES (?, ?)', [String(idOf(1)), 'one'])
  await pool.end()
})
afterAll(async () => {
  await admin?.query(`DROP DATABASE IF EXISTS \`${DB}\``)
  await admin?.end()
})

function poolOf(connectionLimit: number) {
  const pool = createPool(url, { connectionLimit })
  onTestFinished(() => pool.end())
  return pool
}

/** A session holding a write lock on every row of the table until the test ends. */
async function lockRows() {
  const holder = await poolOf(1).getConnection()
  onTestFinished(async () => {
    await holder.query('ROLLBACK').catch(() => undefined)
    holder.release()
  })
  await holder.query('START TRANSACTION')
  await holder.query('SELECT id FROM rs_posts FOR UPDATE')
}

/** Statements on the table still running on the server (killed ones are gone). */
async function waitingStatements() {
  const [found] = await rows<{ n: number }>(
    admin,
    `SELECT count(*) AS n FROM information_schema.processlist
      WHERE db = ? AND command = 'Query' AND info LIKE '%rs_posts%' AND id <> connection_id()`,
    [DB],
  )
  return Number(found!.n)
}

describe('mysqlRowStore deadlines', () => {
  it('a page blocked by a lock fails with TimedOutError and is killed on the server', async () => {
    const store = mysqlRowStore(poolOf(2), { timeoutMs: 300 })
    await store.checkTable(table)
    await lockRows()
    const write = store.writeRows(
      table,
      [{ id: idOf(1), content: JSON.stringify([String(idOf(1)), 'changed']) }],
      'replace',
    )
    await expect(write).rejects.toBeInstanceOf(TimedOutError)
    await expect(store.deleteRange(table, { ...range, limit: 10 })).rejects.toBeInstanceOf(
      TimedOutError,
    )
    await expect.poll(waitingStatements, { timeout: 10_000 }).toBe(0)
  })

  it("the move's signal cancels a statement that is waiting: CancelledError at once", async () => {
    const store = mysqlRowStore(poolOf(2))
    await store.checkTable(table)
    await lockRows()
    const controller = new AbortController()
    const write = store.deleteRows(table, [idOf(1)], controller.signal)
    setTimeout(() => controller.abort(), 100)
    await expect(write).rejects.toBeInstanceOf(CancelledError)
    await expect.poll(waitingStatements, { timeout: 10_000 }).toBe(0)
  })

  it('refuses a bad timeoutMs or an unknown option up front', () => {
    const pool = poolOf(1)
    expect(() => mysqlRowStore(pool, { timeoutMs: 0 })).toThrow(InvalidArgumentError)
    expect(() => mysqlRowStore(pool, { timeout: 5 } as never)).toThrow(InvalidArgumentError)
  })
})
