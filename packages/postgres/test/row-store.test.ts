import { CancelledError, InvalidArgumentError, TimedOutError } from '@shardflake/core'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { postgresRowStore } from '../src/index'
import { createDatabase, dropDatabase, raw } from './helpers'

/**
 * The row store's statements have a deadline: a page blocked by a lock another session holds
 * (or by a server that stopped answering) fails the move typed, is cancelled on the server, and
 * gives its connection back, instead of stalling the move and the writes waiting on it.
 */
let url: string
const table = { name: 'rs_posts' }
const range = { shards: [3], shift: 10, mask: 8191 }
const idOf = (sequence: number) => (BigInt(sequence) << 23n) | (3n << 10n) | 1n

beforeAll(async () => {
  url = await createDatabase('pg_row_store')
  await raw(url, 'CREATE TABLE rs_posts (id bigint PRIMARY KEY, title text NOT NULL)')
  await raw(url, 'INSERT INTO rs_posts VALUES ($1::bigint, $2)', [String(idOf(1)), 'one'])
})
afterAll(async () => {
  await dropDatabase('pg_row_store')
})

/** A session holding a row lock on every row of the table until the test ends. */
async function lockTable() {
  const holder = new pg.Client({ connectionString: url })
  await holder.connect()
  onTestFinished(async () => {
    await holder.query('ROLLBACK').catch(() => undefined)
    await holder.end()
  })
  await holder.query('BEGIN')
  await holder.query('LOCK TABLE rs_posts IN ACCESS EXCLUSIVE MODE')
}

function poolOf(max: number) {
  const pool = new pg.Pool({ connectionString: url, max })
  pool.on('error', () => undefined)
  onTestFinished(() => pool.end())
  return pool
}

/** Statements of this test's store still running on the server (cancelled ones are gone). */
async function waitingStatements() {
  const rows = await raw<{ n: number }>(
    url,
    `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND state = 'active' AND query LIKE '%rs_posts%'
        AND pid <> pg_backend_pid()`,
  )
  return rows[0]!.n
}

describe('postgresRowStore deadlines', () => {
  it('a page blocked by a lock fails with TimedOutError, cancelled on the server, its connection given back', async () => {
    const pool = poolOf(1)
    const store = postgresRowStore(pool, { timeoutMs: 300 })
    await store.checkTable(table)
    await lockTable()
    const write = store.writeRows(
      table,
      [{ id: idOf(2), content: JSON.stringify({ id: String(idOf(2)), title: 'two' }) }],
      'missing',
    )
    await expect(write).rejects.toBeInstanceOf(TimedOutError)
    await expect(store.readRows(table, range)).rejects.toBeInstanceOf(TimedOutError)
    await expect(store.deleteRange(table, { ...range, limit: 10 })).rejects.toBeInstanceOf(
      TimedOutError,
    )
    // Cancelled on the server, not left waiting for the lock.
    await expect.poll(waitingStatements, { timeout: 10_000 }).toBe(0)
    // The pool's one connection is free again: a statement that needs no lock runs.
    expect((await pool.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }])
  })

  it("the move's signal cancels a statement that is waiting: CancelledError at once", async () => {
    const store = postgresRowStore(poolOf(2))
    await store.checkTable(table)
    await lockTable()
    const controller = new AbortController()
    const read = store.readRows(table, range, controller.signal)
    setTimeout(() => controller.abort(), 100)
    await expect(read).rejects.toBeInstanceOf(CancelledError)
    await expect.poll(waitingStatements, { timeout: 10_000 }).toBe(0)
  })

  it('refuses a bad timeoutMs or an unknown option up front', () => {
    const pool = poolOf(1)
    expect(() => postgresRowStore(pool, { timeoutMs: 0 })).toThrow(InvalidArgumentError)
    expect(() => postgresRowStore(pool, { timeoutMs: Number.NaN })).toThrow(InvalidArgumentError)
    expect(() => postgresRowStore(pool, { timeout: 5 } as never)).toThrow(InvalidArgumentError)
  })
})
