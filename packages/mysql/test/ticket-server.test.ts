import { ConfigurationError, InvalidArgumentError, SourceUnavailableError } from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type InstallTicketServersOptions,
  installTicketServers,
  TicketServerSource,
  type TicketServerSourceOptions,
} from '../src'
import { createPool, dropDatabases, RUN, rows, startMariadb, type ThrowawayServer } from './helpers'

const PREFIX = `sf_my_tix_${RUN}_`

const optionsOf = new WeakMap<TicketServerSource, TicketServerSourceOptions>()
/** A source, remembering its options for {@link install}. */
function tickets(options: TicketServerSourceOptions): TicketServerSource {
  const source = new TicketServerSource(options)
  optionsOf.set(source, options)
  return source
}
/** installTicketServers with the servers of `source`. */
function install(
  source: TicketServerSource,
  extra: Omit<InstallTicketServersOptions, keyof TicketServerSourceOptions> = {},
): Promise<void> {
  return installTicketServers({ ...optionsOf.get(source)!, ...extra })
}
const DB_A = `${PREFIX}a`
const DB_B = `${PREFIX}b`

let a: Pool
let b: Pool
let second: ThrowawayServer
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

/** The whole ticket row, through raw SQL. */
async function recorded(
  pool: Pool,
  db: string,
  sequence: string,
): Promise<{ id: bigint; increment: number; offset: number }> {
  const [row] = await rows<{ id: string; inc: number; off: number }>(
    pool,
    `SELECT id, server_increment AS inc, server_offset AS off FROM \`${db}\`.\`tickets64_${sequence}\``,
  )
  return { id: BigInt(row!.id), increment: Number(row!.inc), offset: Number(row!.off) }
}

async function databaseExists(pool: Pool, db: string): Promise<boolean> {
  const found = await rows(
    pool,
    'SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?',
    [db],
  )
  return found.length === 1
}

/** Draws until the source is refused (ConfigurationError); any other error fails the test. */
async function drawUntilRefused(
  source: TicketServerSource,
  into: bigint[],
  onDraw: () => void,
): Promise<ConfigurationError> {
  for (;;) {
    try {
      into.push(...(await source.nextIds(0, 5)))
      onDraw()
    } catch (error) {
      if (error instanceof ConfigurationError) return error
      throw error
    }
  }
}

describe('TicketServerSource on two real servers', () => {
  it('odd tickets from A, even from B, round-robin; batches in one round trip', async () => {
    const source = tickets({
      servers: [
        { pool: a, database: DB_A },
        { pool: b, database: DB_B },
      ],
      sequence: 'photos',
    })
    expect(source.sharding).toBeUndefined()
    await install(source)
    await install(source) // idempotent: keeps the rows
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
    const source = tickets({
      servers: [
        { pool: a, database: DB_A },
        { pool: b, database: DB_B },
      ],
      sequence: 'accounts',
    })
    await install(source)
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
      const source = tickets({
        servers: pools.map((pool, i) => ({ pool, database: `${PREFIX}session_${i}` })),
        sequence: 'likes',
        useServerSettings: true,
      })
      await install(source)
      const ids = []
      for (let i = 0; i < 9; i++) ids.push(await source.nextId(0))
      expect(ids).toEqual([1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n, 9n])
      const [row] = await rows<{ inc: string }>(pools[1]!, 'SELECT @@auto_increment_offset AS inc')
      expect(row!.inc).toBe('2')
      // Raw SQL: each server recorded the settings it was installed with.
      for (const i of [0, 1, 2]) {
        const held = await recorded(a, `${PREFIX}session_${i}`, 'likes')
        expect([held.increment, held.offset]).toEqual([3, i + 1])
      }
    } finally {
      await Promise.all(pools.map((pool) => pool.end()))
    }
  })

  it('refuses a source whose increment does not match the rows (residue check)', async () => {
    const wrong = tickets({
      servers: [{ pool: a, database: DB_A }],
      sequence: 'photos',
      increment: 3,
      retryAfterMs: 0,
    })
    await expect(wrong.nextId(0)).rejects.toBeInstanceOf(ConfigurationError)
    expect(() => tickets({ servers: [a, b], sequence: 'x', increment: 1 })).toThrow(
      ConfigurationError,
    )
  })

  it('a client configured with fewer servers, another increment or swapped offsets is refused, nothing issued', async () => {
    const servers = [
      { pool: a, database: DB_A },
      { pool: b, database: DB_B },
    ]
    const cluster = tickets({ servers, sequence: 'outage' })
    await install(cluster)
    const issued: bigint[] = []
    for (let i = 0; i < 50; i++) issued.push(...(await cluster.nextIds(0, 10)))
    const before = [await ticketRow(a, DB_A, 'outage'), await ticketRow(b, DB_B, 'outage')]
    // Server B dropped from the config during an outage: increment 1 by default.
    const onlyA = tickets({ servers: [servers[0]!], sequence: 'outage' })
    const wider = tickets({ servers, sequence: 'outage', increment: 3 })
    const swapped = tickets({
      servers: [servers[1]!, servers[0]!],
      sequence: 'outage',
    })
    await expect(onlyA.nextIds(0, 200)).rejects.toThrow(
      /asked with increment 1, offset 1, refused the call.*hands out tickets with increment 2, offset 1/,
    )
    for (let i = 0; i < 2; i++) {
      await expect(wider.nextId(0)).rejects.toBeInstanceOf(ConfigurationError)
      await expect(swapped.nextId(0)).rejects.toBeInstanceOf(ConfigurationError)
    }
    // Raw SQL: the function refuses too, and nothing moved.
    await expect(rows(a, `SELECT \`${DB_A}\`.next_outage(5, 1, 1) AS v`)).rejects.toMatchObject({
      sqlState: 'SF030',
      sqlMessage: 'shardflake: this server hands out tickets with increment 2, offset 1',
    })
    expect([await ticketRow(a, DB_A, 'outage'), await ticketRow(b, DB_B, 'outage')]).toEqual(before)

    // Hammered together: the cluster and a one-server client that keeps A's increment and offset
    // (the way to leave B out) share no ticket; the misconfigured clients issue none.
    const keepsA = tickets({
      servers: [{ ...servers[0]!, offset: 1 }],
      sequence: 'outage',
      increment: 2,
    })
    let refused = 0
    const results = await Promise.all(
      Array.from({ length: 24 }, async (_, w) => {
        const ids: bigint[] = []
        for (let i = 0; i < 20; i++) {
          const source = [cluster, keepsA, onlyA, wider][w % 4]!
          try {
            ids.push(...(await source.nextIds(w, 7)))
          } catch (error) {
            if (!(error instanceof ConfigurationError)) throw error
            refused++
          }
        }
        return ids
      }),
    )
    const all = [...issued, ...results.flat()]
    expect(refused).toBe(12 * 20)
    expect(all).toHaveLength(500 + 12 * 20 * 7)
    expect(new Set(all).size).toBe(all.length)
  })

  it('useServerSettings: servers whose settings collide are refused, at install and before any ticket', async () => {
    const s0 = `${PREFIX}dflt_0`
    const s1 = `${PREFIX}dflt_1`
    const [vars] = await rows<{ inc: string; off: string }>(
      a,
      'SELECT @@auto_increment_increment AS inc, @@auto_increment_offset AS off',
    )
    expect([vars!.inc, vars!.off]).toEqual(['1', '1']) // MariaDB's default, on every server
    const both = tickets({
      servers: [
        { pool: a, database: s0 },
        { pool: a, database: s1 },
      ],
      sequence: 'likes',
      useServerSettings: true,
    })
    await expect(install(both)).rejects.toThrow(/would hand out the same tickets/)
    expect(await databaseExists(a, s0)).toBe(false) // nothing changed
    // Each installed alone (1/1 recorded on both), then used together: refused before any ticket.
    for (const database of [s0, s1]) {
      await install(
        tickets({
          servers: [{ pool: a, database }],
          sequence: 'likes',
          useServerSettings: true,
        }),
      )
    }
    const rowsBefore = [await recorded(a, s0, 'likes'), await recorded(a, s1, 'likes')]
    for (let i = 0; i < 3; i++) {
      await expect(both.nextId(0)).rejects.toThrow(/increment 1, offset 1; server 1/)
    }
    expect([await recorded(a, s0, 'likes'), await recorded(a, s1, 'likes')]).toEqual(rowsBefore)
    // Increments that differ are refused as well.
    const sessionPool = (increment: number, offset: number) => {
      const pool = createPool(undefined, { connectionLimit: 2 })
      pool.on('connection', (connection) => {
        void connection.query(
          `SET SESSION auto_increment_increment = ${increment}, auto_increment_offset = ${offset}`,
        )
      })
      return pool
    }
    const pools = [sessionPool(2, 1), sessionPool(3, 2)]
    try {
      const mixed = tickets({
        servers: pools.map((pool, i) => ({ pool, database: `${PREFIX}mixed_${i}` })),
        sequence: 'likes',
        useServerSettings: true,
      })
      await expect(install(mixed)).rejects.toThrow(/increment 2, offset 1; server 1 .*increment 3/)
      expect(await databaseExists(a, `${PREFIX}mixed_0`)).toBe(false)
    } finally {
      await Promise.all(pools.map((pool) => pool.end()))
    }
  })

  it('adding a server: reconfigure pauses all, restarts every counter above the highest; old and new tickets never meet', async () => {
    const DB_C = `${PREFIX}c`
    const two = [
      { pool: a, database: DB_A },
      { pool: b, database: DB_B },
    ]
    const old = tickets({ servers: two, sequence: 'grow' })
    await install(old)
    // Uneven counters: B far ahead of A.
    const early = [...(await old.nextIds(0, 10)), ...(await old.nextIds(0, 5000))]
    const three = tickets({
      servers: [...two, { pool: a, database: DB_C }],
      sequence: 'grow',
    })
    const heldBefore = [await recorded(a, DB_A, 'grow'), await recorded(b, DB_B, 'grow')]
    await expect(install(three)).rejects.toThrow(/holds increment 2, offset 1.*reconfigure/)
    expect([await recorded(a, DB_A, 'grow'), await recorded(b, DB_B, 'grow')]).toEqual(heldBefore)
    expect(await databaseExists(a, DB_C)).toBe(false)

    // Clients of the old configuration hammer both servers while the new one is installed.
    const drawnOld: bigint[] = []
    let started!: () => void
    const running = new Promise<void>((resolve) => {
      started = resolve
    })
    let draws = 0
    const oldWorkers = Array.from({ length: 8 }, () =>
      drawUntilRefused(old, drawnOld, () => {
        if (++draws === 40) started()
      }),
    )
    await running
    await install(three, { reconfigure: true })
    const refusals = await Promise.all(oldWorkers)
    expect(refusals.every((e) => /paused|this source asked with increment 2/.test(e.message))).toBe(
      true,
    )
    let highestOld = 0n
    for (const id of [...early, ...drawnOld]) if (id > highestOld) highestOld = id
    // Raw SQL: every server records the new configuration, counters above every old ticket.
    const held = [
      await recorded(a, DB_A, 'grow'),
      await recorded(b, DB_B, 'grow'),
      await recorded(a, DB_C, 'grow'),
    ]
    expect(held.map((r) => [r.increment, r.offset])).toEqual([
      [3, 1],
      [3, 2],
      [3, 3],
    ])
    for (const r of held) expect(r.id > highestOld).toBe(true)

    const drawnNew = (
      await Promise.all(
        Array.from({ length: 12 }, async (_, w) => {
          const ids: bigint[] = []
          for (let i = 0; i < 15; i++) ids.push(...(await three.nextIds(w, 4)))
          return ids
        }),
      )
    ).flat()
    expect(drawnNew.every((id) => id > highestOld)).toBe(true)
    expect(new Set(drawnNew.map((id) => id % 3n)).size).toBe(3)
    const all = [...early, ...drawnOld, ...drawnNew]
    expect(new Set(all).size).toBe(all.length)
    await expect(old.nextId(0)).rejects.toBeInstanceOf(ConfigurationError)
    // Installing the same configuration again changes nothing.
    const counters = await Promise.all([
      ticketRow(a, DB_A, 'grow'),
      ticketRow(b, DB_B, 'grow'),
      ticketRow(a, DB_C, 'grow'),
    ])
    await install(three)
    await install(three, { reconfigure: true })
    expect(
      await Promise.all([
        ticketRow(a, DB_A, 'grow'),
        ticketRow(b, DB_B, 'grow'),
        ticketRow(a, DB_C, 'grow'),
      ]),
    ).toEqual(counters)
  })

  it('a replacement for a lost server starts above the others (and above startAbove)', async () => {
    const lost = `${PREFIX}lost`
    const servers = [
      { pool: a, database: DB_A },
      { pool: a, database: lost },
    ]
    const source = tickets({ servers, sequence: 'spare' })
    await install(source)
    for (let i = 0; i < 20; i++) await source.nextIds(0, 100)
    const highestA = await ticketRow(a, DB_A, 'spare')
    await a.query(`DROP DATABASE \`${lost}\``) // the server is gone, with its counter
    await install(source)
    const fresh = await recorded(a, lost, 'spare')
    expect([fresh.increment, fresh.offset]).toEqual([2, 2])
    expect(fresh.id >= highestA && fresh.id % 2n === 0n).toBe(true)
    await a.query(`DROP DATABASE \`${lost}\``)
    await install(source, { startAbove: 1_000_000n })
    expect((await recorded(a, lost, 'spare')).id).toBe(1_000_002n)
    expect(await ticketRow(a, DB_A, 'spare')).toBe(highestA) // the kept server is untouched
  })

  it('upgrades a ticket table of the earlier version (no recorded settings) only with reconfigure', async () => {
    const legacy = [`${PREFIX}old_a`, `${PREFIX}old_b`]
    for (const [i, db] of legacy.entries()) {
      await a.query(`CREATE DATABASE \`${db}\``)
      await a.query(
        `CREATE TABLE \`${db}\`.tickets64_old (stub CHAR(1) NOT NULL PRIMARY KEY, id BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB`,
      )
      await a.query(`INSERT INTO \`${db}\`.tickets64_old VALUES ('a', ?)`, [i === 0 ? 101 : 250])
    }
    const source = tickets({
      servers: legacy.map((database) => ({ pool: a, database })),
      sequence: 'old',
    })
    await expect(install(source)).rejects.toThrow(/earlier version/)
    await expect(source.nextId(0)).rejects.toBeInstanceOf(ConfigurationError)
    await install(source, { reconfigure: true })
    const held = await Promise.all(legacy.map((db) => recorded(a, db, 'old')))
    expect(held.map((r) => [r.increment, r.offset])).toEqual([
      [2, 1],
      [2, 2],
    ])
    expect(held.map((r) => r.id)).toEqual([251n, 250n])
    const next = [await source.nextId(0), await source.nextId(0)]
    expect(next.sort((x, y) => Number(x - y))).toEqual([250n, 251n])
  })

  it('fails over: one endpoint down all along, another stopped mid-run; IDs keep coming, none repeated', async () => {
    const source = tickets({
      servers: [
        { pool: a, database: DB_A },
        { pool: b, database: DB_B },
        { pool: dead, database: DB_B },
      ],
      sequence: 'comments',
      retryAfterMs: 60_000,
    })
    await expect(install(source)).rejects.toThrow()
    // Install on the two live servers only (the third is unreachable).
    await install(
      tickets({
        servers: [
          { pool: a, database: DB_A, offset: 1 },
          { pool: b, database: DB_B, offset: 2 },
        ],
        increment: 3,
        sequence: 'comments',
      }),
    )
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
    const source = tickets({ servers: [dead], sequence: 'photos' })
    await expect(source.nextId(0)).rejects.toBeInstanceOf(SourceUnavailableError)
  })

  it('a stopped (SIGSTOP) server is skipped after timeoutMs: every caller is served by the healthy one', async () => {
    const hung = await startMariadb()
    const hungPool = createPool(hung.url, { connectionLimit: 8 })
    try {
      const options = {
        servers: [
          { pool: a, database: `${PREFIX}hang_a` },
          { pool: hungPool, database: `${PREFIX}hang_b` },
        ],
        sequence: 'hang',
        timeoutMs: 2000,
        retryAfterMs: 60_000,
      }
      await installTicketServers({ ...options, timeoutMs: 60_000 })
      const source = new TicketServerSource(options)
      // Both answer, and the pools hold open connections to both.
      await Promise.all(Array.from({ length: 8 }, () => hungPool.query('SELECT 1')))
      const warm: bigint[] = []
      for (let i = 0; i < 8; i++) warm.push(await source.nextId(0))
      expect(new Set(warm.map((id) => id % 2n))).toEqual(new Set([0n, 1n]))
      await hung.kill('SIGSTOP')
      const served = await Promise.all(Array.from({ length: 8 }, () => source.nextIds(0, 5)))
      const all = served.flat()
      expect(all).toHaveLength(40)
      expect(new Set([...warm, ...all]).size).toBe(48)
      expect(all.every((id) => id % 2n === 1n)).toBe(true) // all from the healthy server
      // Installing needs every server: a hung one fails it after timeoutMs, changing nothing.
      await expect(installTicketServers(options)).rejects.toBeInstanceOf(SourceUnavailableError)
      await expect(source.nextIds(0, 1_000_001)).rejects.toBeInstanceOf(InvalidArgumentError)
    } finally {
      await hung.kill('SIGCONT')
      await hungPool.end()
      await hung.stop()
    }
  })

  it('a server that does not answer within timeoutMs, with no other left: SourceUnavailableError', async () => {
    const hung = await startMariadb()
    const hungPool = createPool(hung.url, { connectionLimit: 2 })
    try {
      const options = { servers: [hungPool], sequence: 'alone', timeoutMs: 1000 }
      await installTicketServers({ ...options, timeoutMs: 60_000 })
      const source = new TicketServerSource(options)
      await source.nextId(0)
      await hung.kill('SIGSTOP')
      const error = await source.nextId(0).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(SourceUnavailableError)
      expect((error as Error).cause).toMatchObject({ code: 'TIMED_OUT' })
    } finally {
      await hung.kill('SIGCONT')
      await hungPool.end()
      await hung.stop()
    }
  })
})
