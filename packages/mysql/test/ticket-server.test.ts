import { ConfigurationError, SourceUnavailableError } from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { TicketServerSource } from '../src'
import { createPool, dropDatabases, type ExtraServer, rows, startMariadb } from './helpers'

const PREFIX = 'sf_my_tix_'
const DB_A = `${PREFIX}a`
const DB_B = `${PREFIX}b`

let a: Pool
let b: Pool
let second: ExtraServer
let dead: Pool

beforeAll(async () => {
  second = await startMariadb()
  a = createPool(undefined, { connectionLimit: 16 })
  b = createPool(second.url, { connectionLimit: 16 })
  // An endpoint that is down for the whole file: a port nobody listens on.
  const gone = await startMariadb()
  await gone.stop()
  dead = createPool(gone.url, { connectTimeout: 2000 })
  await dropDatabases(a, PREFIX)
})

afterAll(async () => {
  await dropDatabases(a, PREFIX)
  await Promise.all([a.end(), b.end(), dead.end()])
  await second.stop()
})

async function ticketRow(pool: Pool, db: string, sequence: string): Promise<bigint> {
  const [row] = await rows<{ id: string }>(
    pool,
    `SELECT id FROM \`${db}\`.\`tickets64_${sequence}\``,
  )
  return BigInt(row!.id)
}

describe('TicketServerSource on two real servers', () => {
  it('odd tickets from A, even from B, round-robin; batches in one round trip', async () => {
    const source = new TicketServerSource({
      servers: [
        { pool: a, database: DB_A },
        { pool: b, database: DB_B },
      ],
      sequence: 'photos',
    })
    expect(source.layout).toBeUndefined()
    await source.install()
    await source.install() // idempotent: keeps the rows
    const singles: bigint[] = []
    for (let i = 0; i < 6; i++) singles.push(await source.nextId(0))
    expect(singles).toEqual([1n, 2n, 3n, 4n, 5n, 6n])
    const batch = await source.nextIds(0, 1000)
    expect(batch[1]! - batch[0]!).toBe(2n)
    expect(new Set(batch.map((id) => id % 2n)).size).toBe(1)
    for (let i = 1; i < batch.length; i++) expect(batch[i]! > batch[i - 1]!).toBe(true)
    // Raw SQL: each server's row is its next ticket, in its own residue class.
    expect((await ticketRow(a, DB_A, 'photos')) % 2n).toBe(1n)
    expect((await ticketRow(b, DB_B, 'photos')) % 2n).toBe(0n)
  })

  it('16 concurrent connections per server: no deadlock, no error, no repeat', async () => {
    const source = new TicketServerSource({
      servers: [
        { pool: a, database: DB_A },
        { pool: b, database: DB_B },
      ],
      sequence: 'accounts',
    })
    await source.install()
    const startA = await ticketRow(a, DB_A, 'accounts')
    const startB = await ticketRow(b, DB_B, 'accounts')
    const results = await Promise.allSettled(
      Array.from({ length: 32 }, async (_, w) => {
        const ids: bigint[] = []
        for (let i = 0; i < 40; i++) {
          if (i % 4 === 0) ids.push(...(await source.nextIds(w, 25)))
          else ids.push(await source.nextId(w))
        }
        return ids
      }),
    )
    expect(results.filter((r) => r.status === 'rejected')).toEqual([])
    const all = results.flatMap((r) => (r.status === 'fulfilled' ? r.value : []))
    expect(all).toHaveLength(32 * (10 * 25 + 30))
    expect(new Set(all).size).toBe(all.length)
    const drawn =
      (await ticketRow(a, DB_A, 'accounts')) -
      startA +
      (await ticketRow(b, DB_B, 'accounts')) -
      startB
    expect(drawn).toBe(BigInt(all.length) * 2n)
  })

  it('uses the servers own auto_increment_increment/offset when told to (per-session here)', async () => {
    const sessionPool = (offset: number) => {
      const pool = createPool(undefined, { connectionLimit: 4 })
      pool.on('connection', (connection) => {
        void connection.query(
          `SET SESSION auto_increment_increment = 3, auto_increment_offset = ${offset}`,
        )
      })
      return pool
    }
    const pools = [sessionPool(1), sessionPool(2), sessionPool(3)]
    try {
      const source = new TicketServerSource({
        servers: pools.map((pool, i) => ({ pool, database: `${PREFIX}session_${i}` })),
        sequence: 'likes',
        useServerSettings: true,
      })
      await source.install()
      const ids = []
      for (let i = 0; i < 9; i++) ids.push(await source.nextId(0))
      expect(ids).toEqual([1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n, 9n])
      const [row] = await rows<{ inc: string }>(pools[1]!, 'SELECT @@auto_increment_offset AS inc')
      expect(row!.inc).toBe('2')
    } finally {
      await Promise.all(pools.map((pool) => pool.end()))
    }
  })

  it('refuses a source whose increment does not match the rows (residue check)', async () => {
    const wrong = new TicketServerSource({
      servers: [{ pool: a, database: DB_A }],
      sequence: 'photos',
      increment: 3,
      retryDownMs: 0,
    })
    await expect(wrong.nextId(0)).rejects.toBeInstanceOf(ConfigurationError)
    expect(() => new TicketServerSource({ servers: [a, b], sequence: 'x', increment: 1 })).toThrow(
      ConfigurationError,
    )
  })

  it('fails over: one endpoint down all along, another stopped mid-run; IDs keep coming, none repeated', async () => {
    const source = new TicketServerSource({
      servers: [
        { pool: a, database: DB_A },
        { pool: b, database: DB_B },
        { pool: dead, database: DB_B },
      ],
      sequence: 'comments',
      retryDownMs: 60_000,
    })
    await expect(source.install()).rejects.toThrow()
    // Install on the two live servers only (the third is unreachable).
    await new TicketServerSource({
      servers: [
        { pool: a, database: DB_A, offset: 1 },
        { pool: b, database: DB_B, offset: 2 },
      ],
      increment: 3,
      sequence: 'comments',
    }).install()
    let stopped = false
    const workers = Array.from({ length: 8 }, async (_, w) => {
      const ids: bigint[] = []
      for (let i = 0; i < 60; i++) {
        if (w === 0 && i === 20) {
          await second.stop()
          stopped = true
        }
        ids.push(...(await source.nextIds(0, 3)))
      }
      return ids
    })
    const all = (await Promise.all(workers)).flat()
    expect(stopped).toBe(true)
    expect(all).toHaveLength(8 * 60 * 3)
    expect(new Set(all).size).toBe(all.length)
    expect(all.some((id) => id % 3n === 0n)).toBe(false)
    expect(all.filter((id) => id % 3n === 2n).length).toBeGreaterThan(0)
    // After the stop only A answers.
    const after = await source.nextIds(0, 10)
    expect(after.every((id) => id % 3n === 1n)).toBe(true)
  })

  it('throws SourceUnavailableError when no server can be reached', async () => {
    const source = new TicketServerSource({ servers: [dead], sequence: 'photos' })
    await expect(source.nextId(0)).rejects.toBeInstanceOf(SourceUnavailableError)
  })
})
