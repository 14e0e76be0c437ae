import { instagram } from '@shardflake/core'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { installPostgres } from '../src/index'
import { resolveSqlOptions } from '../src/sql/options'
import { createDatabase, dropDatabase, holdMoveLock, raw, sharding } from './helpers'

/**
 * next_id() / next_ids() against the failure modes of the published function: more than 1024
 * IDs per ms in one statement, many sessions at once, sequence CACHE, a clock stepping back, raw
 * INSERTs through the DEFAULT, and locks that outlive the call. Every ID is collected and counted.
 */
const DB = 'sf_pg_unique'
let url: string
let pool: pg.Pool

beforeAll(async () => {
  url = await createDatabase(DB)
  pool = new pg.Pool({ connectionString: url, max: 34 })
  pool.on('error', () => undefined) // terminated by DROP DATABASE ... FORCE at teardown
  // Waits for the clock of up to 2 s: these tests step the clock back by more than the drift.
  await installPostgres(pool, { sharding, shards: [5], maxWaitMs: 2000 })
  await installPostgres(pool, { sharding, shards: [7], cache: 100, maxWaitMs: 2000 })
})
afterAll(async () => {
  await pool.end()
  await dropDatabase(DB)
})

const ids = (rows: { id: string }[]) => rows.map((row) => BigInt(row.id))

function distinct(all: bigint[]): number {
  return new Set(all).size
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** The seqlock generation of a shard: every move of its sequence raises it by one. */
async function generation(shard: number): Promise<bigint> {
  const [row] = await raw<{ g: string }>(
    url,
    `SELECT last_value::text AS g FROM shard_${shard}.id_gen`,
  )
  return BigInt(row!.g)
}

/** The sequence's last value (ID space). */
async function sequenceValue(shard: number): Promise<bigint> {
  const [row] = await raw<{ v: string }>(
    url,
    `SELECT last_value::text AS v FROM shard_${shard}.id_seq`,
  )
  return BigInt(row!.v)
}

/** Replaces the clock next_id() reads (the test-only override) by the real clock + offset. */
async function setClockOffset(ms: number): Promise<void> {
  await raw(
    url,
    `CREATE OR REPLACE FUNCTION shardflake.now_ms() RETURNS bigint LANGUAGE sql VOLATILE AS $$
       SELECT floor(date_part('epoch', clock_timestamp()) * 1000)::bigint + (${ms})
     $$`,
  )
}

describe.each([
  { shard: 5, cache: 1 },
  { shard: 7, cache: 100 },
])('shard $shard (sequence CACHE $cache)', ({ shard }) => {
  it('one statement asking for 200,000 IDs: next_ids(200000) and next_id() per row', async () => {
    const batch = ids(await raw(url, `SELECT x::text AS id FROM shard_${shard}.next_ids(200000) x`))
    const perRow = ids(
      await raw(url, `SELECT shard_${shard}.next_id()::text AS id FROM generate_series(1, 200000)`),
    )
    expect(batch).toHaveLength(200_000)
    expect(distinct(batch)).toBe(200_000)
    expect(distinct(perRow)).toBe(200_000)
    expect(distinct([...batch, ...perRow])).toBe(400_000)
    for (let i = 1; i < batch.length; i++) expect(batch[i]! > batch[i - 1]!).toBe(true)
    for (const id of batch.slice(0, 1000)) expect(instagram.shardOf(id)).toBe(shard)
  })

  it('32 concurrent sessions x 10,000 IDs, with the clock stepping back 1 s half-way', async () => {
    await setClockOffset(0)
    const gen = async () =>
      Number(
        (
          await raw<{ g: string }>(url, `SELECT last_value::text AS g FROM shard_${shard}.id_gen`)
        )[0]!.g,
      )
    const movesBefore = await gen()
    let stepped = false
    const sessions = Array.from({ length: 32 }, async (_, session) => {
      const client = await pool.connect()
      const got: bigint[] = []
      try {
        for (let round = 0; round < 20; round++) {
          if (round === 10 && session === 0) {
            await setClockOffset(-1000)
            stepped = true
          }
          const sql =
            round % 2 === 0
              ? `SELECT shard_${shard}.next_id()::text AS id FROM generate_series(1, 500)`
              : `SELECT x::text AS id FROM shard_${shard}.next_ids(500) x`
          const batch = ids((await client.query(sql)).rows)
          // Within a session IDs keep growing, across the step back too.
          if (got.length > 0) expect(batch[0]! > got[got.length - 1]!).toBe(true)
          got.push(...batch)
        }
      } finally {
        client.release()
      }
      return got
    })
    const all = (await Promise.all(sessions)).flat()
    const [clock] = await raw<{ skew: string }>(
      url,
      `SELECT (shardflake.now_ms() - floor(date_part('epoch', clock_timestamp()) * 1000))::text AS skew`,
    )
    await setClockOffset(0)
    // The sequence was moved forward to the clock while the sessions were drawing (the race the
    // seqlock guards against really happened).
    expect(await gen()).toBeGreaterThan(movesBefore)
    expect(stepped).toBe(true)
    // The override was in force. The two clock reads are apart by however long the server was
    // off the core between them: a millisecond on a quiet machine, more on a loaded one.
    expect(Number(clock!.skew)).toBeGreaterThanOrEqual(-1100)
    expect(Number(clock!.skew)).toBeLessThanOrEqual(-999)
    expect(all).toHaveLength(320_000)
    expect(distinct(all)).toBe(320_000)
    for (const id of all.slice(0, 5000)) expect(instagram.shardOf(id)).toBe(shard)
  })

  it('16 sessions for seconds: next_id(), DEFAULT inserts and next_ids(n) around the reservation threshold, through a clock jump forward and a 1.3 s step back', async () => {
    await setClockOffset(0)
    const table = `mix_${shard}`
    await raw(
      url,
      `CREATE TABLE ${table} (id bigint PRIMARY KEY DEFAULT shard_${shard}.next_id(), session int NOT NULL)`,
    )
    const { reserveFrom } = resolveSqlOptions({ sharding })
    const sizes = [1, 7, 31, reserveFrom - 1, reserveFrom, reserveFrom + 1, 500, 2000]
    const genBefore = await generation(shard)
    let reservations = 0
    let phase = 0
    const runMs = 6000
    const start = Date.now()
    const sessions = Array.from({ length: 16 }, async (_, session) => {
      const client = await pool.connect()
      const got: bigint[] = []
      const inserted: bigint[] = []
      try {
        for (let round = 0; round < 30 || Date.now() - start < runMs; round++) {
          if (session === 0) {
            // A third in, the clock jumps 300 ms forward (the sequence is then far behind it: a
            // catch-up); two thirds in, it steps back 1.3 s (the sequence is then ahead of it).
            const elapsed = Date.now() - start
            if (phase === 0 && elapsed > runMs / 3) {
              await setClockOffset(300)
              phase = 1
            } else if (phase === 1 && elapsed > (runMs * 2) / 3) {
              await setClockOffset(-1000)
              phase = 2
            }
          }
          const op = (round + session) % 6
          let sql: string
          if (op === 0) sql = `SELECT shard_${shard}.next_id()::text AS id`
          else if (op === 1)
            sql = `SELECT shard_${shard}.next_id()::text AS id FROM generate_series(1, 50)`
          else if (op === 2)
            sql = `INSERT INTO ${table} (session) VALUES (${session}) RETURNING id::text AS id`
          else if (op === 3)
            sql = `INSERT INTO ${table} (session) SELECT ${session} FROM generate_series(1, 200) RETURNING id::text AS id`
          else {
            const n = sizes[(round * 7 + session) % sizes.length]!
            if (n >= reserveFrom) reservations++
            sql = `SELECT x::text AS id FROM shard_${shard}.next_ids(${n}) x`
          }
          const batch = ids((await client.query(sql)).rows)
          // Within a session IDs keep growing, whatever the path and the clock.
          if (got.length > 0) expect(batch[0]! > got[got.length - 1]!).toBe(true)
          got.push(...batch)
          if (op === 2 || op === 3) inserted.push(...batch)
          // Idle moments, so the sequence also falls behind the clock on its own.
          if (round % 10 === 9) await sleep((session % 3) * 20)
        }
      } finally {
        client.release()
      }
      return { got, inserted }
    })
    const results = await Promise.all(sessions)
    await setClockOffset(0)
    const all = results.flatMap((r) => r.got)
    const inserted = results.flatMap((r) => r.inserted)
    expect(phase).toBe(2)
    // Zero duplicates among everything handed out: drawn, reserved and inserted.
    expect(all.length).toBeGreaterThan(50_000)
    expect(distinct(all)).toBe(all.length)
    for (const id of all.slice(0, 5000)) expect(instagram.shardOf(id)).toBe(shard)
    // The table, read back raw, holds exactly the inserted IDs.
    const [count] = await raw<{ n: string; d: string }>(
      url,
      `SELECT count(*)::text AS n, count(DISTINCT id)::text AS d FROM ${table}`,
    )
    expect(count).toEqual({ n: String(inserted.length), d: String(inserted.length) })
    // Every reservation is one move; more moves than that means catch-ups happened too.
    expect(reservations).toBeGreaterThan(100)
    expect(await generation(shard)).toBeGreaterThan(genBefore + BigInt(reservations))
    const [locks] = await raw<{ n: string }>(
      url,
      `SELECT count(*)::text AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    )
    expect(locks!.n).toBe('0')
  })

  it('raw INSERTs through DEFAULT next_id() from 16 plain connections never collide', async () => {
    const table = `u_${shard}`
    await raw(
      url,
      `CREATE TABLE ${table} (id bigint PRIMARY KEY DEFAULT shard_${shard}.next_id(), session int NOT NULL)`,
    )
    const writers = Array.from({ length: 16 }, async (_, session) => {
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      try {
        for (let i = 0; i < 12; i++) {
          await client.query(
            i % 3 === 0
              ? `INSERT INTO ${table} (session) VALUES (${session})`
              : `INSERT INTO ${table} (session) SELECT ${session} FROM generate_series(1, 1000)`,
          )
        }
      } finally {
        await client.end()
      }
    })
    await Promise.all(writers)
    const [count] = await raw<{ n: string; d: string; shards: string }>(
      url,
      `SELECT count(*)::text AS n, count(DISTINCT id)::text AS d, string_agg(DISTINCT shardflake.shardflake_shard(id)::text, ',') AS shards FROM ${table}`,
    )
    expect(count).toEqual({
      n: String(16 * 8 * 1000 + 16 * 4),
      d: String(16 * 8 * 1000 + 16 * 4),
      shards: String(shard),
    })
  })
})

describe('reservations (next_ids(n) from reserveFrom on)', () => {
  const { reserveFrom } = resolveSqlOptions({ sharding })

  it('n >= reserveFrom takes one move of the sequence and the lock; fewer IDs take neither', async () => {
    for (const n of [reserveFrom, reserveFrom + 1, 5000]) {
      const before = await generation(5)
      const rows = ids(await raw(url, `SELECT x::text AS id FROM shard_5.next_ids(${n}) x`))
      expect(await generation(5)).toBe(before + 1n)
      expect(rows).toHaveLength(n)
      // One contiguous range of the sequence, ascending, of shard 5.
      const values = rows.map((id) => ((id >> 23n) << 10n) | (id & 1023n))
      for (let i = 1; i < values.length; i++) expect(values[i]).toBe(values[i - 1]! + 1n)
      for (const id of rows) expect(instagram.shardOf(id)).toBe(5)
      expect(values[n - 1]).toBe(await sequenceValue(5))
    }
    // With the lock held (and id_gen untouched), n draws go on; a reservation waits.
    const holder = new pg.Client({ connectionString: url })
    await holder.connect()
    try {
      const unlock = await holdMoveLock(holder, 5)
      const small = ids(
        await raw(url, `SELECT x::text AS id FROM shard_5.next_ids(${reserveFrom - 1}) x`),
      )
      expect(distinct(small)).toBe(reserveFrom - 1)
      let done = false
      const big = raw<{ id: string }>(
        url,
        `SELECT x::text AS id FROM shard_5.next_ids(${reserveFrom}) x`,
      ).then((rows) => {
        done = true
        return ids(rows)
      })
      await sleep(300)
      expect(done).toBe(false)
      await unlock()
      const reserved = await big
      expect(reserved[0]! > small[small.length - 1]!).toBe(true)
    } finally {
      await holder.end()
    }
  })

  it('a reservation that overlaps a move waits for it and takes a range above it', async () => {
    const mover = new pg.Client({ connectionString: url })
    await mover.connect()
    try {
      const unlock = await holdMoveLock(mover, 5)
      const g = (await mover.query('SELECT last_value::text AS g FROM shard_5.id_gen')).rows[0]
        .g as string
      await mover.query(`SELECT setval('shard_5.id_gen', $1::bigint, false)`, [g])
      let done = false
      const reserver = raw<{ id: string }>(
        url,
        'SELECT x::text AS id FROM shard_5.next_ids(1000) x',
      ).then((rows) => {
        done = true
        return ids(rows)
      })
      // A single draw meanwhile sees the move in progress and waits too.
      const single = raw<{ id: string }>(url, 'SELECT shard_5.next_id()::text AS id')
      await sleep(300)
      expect(done).toBe(false)
      const target = (await sequenceValue(5)) + 200_000n
      await mover.query(`SELECT setval('shard_5.id_seq', $1::bigint, true)`, [target.toString()])
      await mover.query(`SELECT setval('shard_5.id_gen', $1::bigint + 1, true)`, [g])
      await unlock()
      const range = await reserver
      const [one] = ids(await single)
      const value = (id: bigint) => ((id >> 23n) << 10n) | (id & 1023n)
      expect(value(range[0]!) > target).toBe(true)
      expect(value(one!) > target).toBe(true)
      expect(distinct([...range, one!])).toBe(1001)
    } finally {
      await mover.end()
    }
  })

  it('a reservation cancelled while it waits for the lock leaves no lock behind', async () => {
    const holder = new pg.Client({ connectionString: url })
    const victim = new pg.Client({ connectionString: url })
    await holder.connect()
    await victim.connect()
    try {
      const unlock = await holdMoveLock(holder, 5)
      await victim.query(`SET statement_timeout = '200ms'`)
      const error = await victim
        .query('SELECT count(*) FROM shard_5.next_ids(1000)')
        .catch((e: unknown) => e)
      expect((error as { code?: string }).code).toBe('57014')
      const pid = (await victim.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number
      const [held] = await raw<{ n: string }>(
        url,
        `SELECT count(*)::text AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = $1`,
        [pid],
      )
      expect(held!.n).toBe('0')
      await unlock()
      const again = await victim.query(
        'SELECT count(DISTINCT x)::int AS n FROM shard_5.next_ids(1000) x',
      )
      expect(again.rows[0].n).toBe(1000)
    } finally {
      await holder.end()
      await victim.end()
    }
  })

  it('refuses a batch beyond what the shard makes within drift and wait as overload (SF006, not a clock fault), leaving the sequence where it was', async () => {
    const before = await sequenceValue(5)
    // 1000 ms of drift plus 2000 ms of wait allowed: 3,072,000 values of ID space at most.
    const error = await raw(url, 'SELECT count(*) FROM shard_5.next_ids(4000000)').catch(
      (e: unknown) => e,
    )
    expect((error as { code?: string }).code).toBe('SF006')
    expect(String((error as Error).message)).toMatch(/The clock is fine; no ID was issued/)
    expect(await sequenceValue(5)).toBe(before)
    const after = ids(await raw(url, 'SELECT x::text AS id FROM shard_5.next_ids(1000) x'))
    expect(after).toHaveLength(1000)
  })
})

describe('next_id() in a session that already drew, and the clock', () => {
  /** The time an ID of shard 5 carries, in ms since 1970. */
  const timeOf = (id: bigint) => Number(id >> 23n) + instagram.epoch

  it('an idle sequence more than marginMs behind the clock is caught up: the ID carries the current time', async () => {
    await setClockOffset(0)
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      for (let i = 0; i < 3; i++) await client.query('SELECT shard_5.next_id()')
      for (let round = 0; round < 3; round++) {
        await sleep(300) // idle: the sequence falls 300 ms behind the clock (margin 50 ms)
        const { rows } = await client.query(
          'SELECT shardflake.now_ms()::text AS before, shard_5.next_id()::text AS id',
        )
        expect(timeOf(BigInt(rows[0].id))).toBeGreaterThanOrEqual(Number(rows[0].before) - 51)
      }
    } finally {
      await client.end()
    }
  })

  it('a clock stepped back 1.5 s (drift 1 s): the call waits until its ID is at most maxDriftMs ahead', async () => {
    await setClockOffset(0)
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      for (let i = 0; i < 3; i++) await client.query('SELECT shard_5.next_id()')
      await setClockOffset(-1500)
      const { rows } = await client.query(
        'SELECT shard_5.next_id()::text AS id, shardflake.now_ms()::text AS after',
      )
      expect(timeOf(BigInt(rows[0].id))).toBeLessThanOrEqual(Number(rows[0].after) + 1000)
    } finally {
      await setClockOffset(0)
      await client.end()
    }
  })
})

describe('locks', () => {
  it('a draw that overlaps a move of the sequence waits and returns a value from after the move', async () => {
    const mover = new pg.Client({ connectionString: url })
    await mover.connect()
    try {
      // The mover's first steps: the lock, then id_gen "not called" (readers see NULL).
      const unlock = await holdMoveLock(mover, 5)
      const g = (await mover.query('SELECT last_value::text AS g FROM shard_5.id_gen')).rows[0]
        .g as string
      await mover.query(`SELECT setval('shard_5.id_gen', $1::bigint, false)`, [g])
      let done = false
      const drawer = raw<{ id: string }>(url, 'SELECT shard_5.next_id()::text AS id').then(
        (rows) => {
          done = true
          return rows
        },
      )
      await new Promise((resolve) => setTimeout(resolve, 300))
      expect(done).toBe(false) // the draw saw the move in progress and waits
      // The move: the sequence jumps forward, then a new generation, then the lock goes.
      const last = BigInt(
        (await mover.query('SELECT last_value::text AS v FROM shard_5.id_seq')).rows[0].v as string,
      )
      const target = last + 200_000n
      await mover.query(`SELECT setval('shard_5.id_seq', $1::bigint, true)`, [target.toString()])
      await mover.query(`SELECT setval('shard_5.id_gen', $1::bigint + 1, true)`, [g])
      await unlock()
      const [row] = await drawer
      const id = BigInt(row!.id)
      const value = ((id >> 23n) << 10n) | (id & 1023n) // back to the sequence's ID space
      expect(value > target).toBe(true)
      const advisory = await raw<{ n: string }>(
        url,
        `SELECT count(*)::text AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      )
      expect(advisory[0]!.n).toBe('0')
    } finally {
      await mover.end()
    }
  })

  it('recovers when a session died while moving the sequence (id_gen left NULL)', async () => {
    const [before] = await raw<{ id: string }>(url, 'SELECT shard_5.next_id()::text AS id')
    await raw(
      url,
      `SELECT setval('shard_5.id_gen', (SELECT last_value FROM shard_5.id_gen), false)`,
    )
    const [nulled] = await raw<{ g: string | null }>(
      url,
      `SELECT pg_sequence_last_value('shard_5.id_gen') AS g`,
    )
    expect(nulled!.g).toBeNull()
    const after = await raw<{ id: string }>(
      url,
      'SELECT shard_5.next_id()::text AS id FROM generate_series(1, 3)',
    )
    expect(BigInt(after[0]!.id) > BigInt(before!.id)).toBe(true)
    const [repaired] = await raw<{ g: string | null }>(
      url,
      `SELECT pg_sequence_last_value('shard_5.id_gen')::text AS g`,
    )
    expect(repaired!.g).not.toBeNull()
  })

  it('an open transaction that moved the sequence blocks nobody: its locks are of past generations', async () => {
    const holder = new pg.Client({ connectionString: url })
    const other = new pg.Client({ connectionString: url })
    await holder.connect()
    await other.connect()
    try {
      await raw(
        url,
        'CREATE TABLE IF NOT EXISTS held (id bigint PRIMARY KEY DEFAULT shard_5.next_id())',
      )
      const genBefore = await generation(5)
      await holder.query('BEGIN')
      // Let the sequence fall behind so the call moves it forward (the path that takes a lock).
      await new Promise((resolve) => setTimeout(resolve, 80))
      await holder.query('INSERT INTO held DEFAULT VALUES')
      expect(await generation(5)).toBeGreaterThan(genBefore)
      // The move lock of the current generation is free: the next move takes it at once.
      const probe = await holdMoveLock(other, 5)
      await probe()
      await other.query(`SET statement_timeout = '5s'`)
      await new Promise((resolve) => setTimeout(resolve, 80))
      await other.query('INSERT INTO held SELECT FROM generate_series(1, 100)')
      const rows = await other.query('SELECT x::text FROM shard_5.next_ids(10) x')
      expect(rows.rowCount).toBe(10)
      const reserved = await other.query('SELECT x::text FROM shard_5.next_ids(500) x')
      expect(reserved.rowCount).toBe(500)
      await holder.query('COMMIT')
      const [n] = await raw<{ n: string }>(url, 'SELECT count(*)::text AS n FROM held')
      expect(n!.n).toBe('101')
      const pid = (await holder.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number
      const advisory = await raw<{ n: string }>(
        url,
        `SELECT count(*)::text AS n FROM pg_locks WHERE pid = $1 AND locktype = 'advisory'`,
        [pid],
      )
      expect(advisory[0]!.n).toBe('0')
    } finally {
      await holder.end()
      await other.end()
    }
  })
})
