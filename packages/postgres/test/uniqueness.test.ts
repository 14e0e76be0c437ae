import { instagram } from '@shardflake/core'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { installPostgres, resolveSqlOptions } from '../src/index'
import { createDatabase, dropDatabase, raw } from './helpers'

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
  await installPostgres(pool, { layout: instagram, shards: [5] })
  await installPostgres(pool, { layout: instagram, shards: [7], cache: 100 })
})
afterAll(async () => {
  await pool.end()
  await dropDatabase(DB)
})

const ids = (rows: { id: string }[]) => rows.map((row) => BigInt(row.id))

function distinct(all: bigint[]): number {
  return new Set(all).size
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
    expect(Number(clock!.skew)).toBe(-1000)
    expect(all).toHaveLength(320_000)
    expect(distinct(all)).toBe(320_000)
    for (const id of all.slice(0, 5000)) expect(instagram.shardOf(id)).toBe(shard)
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

describe('locks', () => {
  it('a draw that overlaps a move of the sequence waits and returns a value from after the move', async () => {
    const { lockKey } = resolveSqlOptions({ layout: instagram })
    const mover = new pg.Client({ connectionString: url })
    await mover.connect()
    try {
      // The mover's first steps: the lock, then id_gen "not called" (readers see NULL).
      await mover.query('SELECT pg_advisory_lock($1, 5)', [lockKey])
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
      await mover.query('SELECT pg_advisory_unlock($1, 5)', [lockKey])
      const [row] = await drawer
      const id = BigInt(row!.id)
      const value = ((id >> 23n) << 10n) | (id & 1023n) // back to the sequence's ID space
      expect(value > target).toBe(true)
      const advisory = await raw<{ n: string }>(
        url,
        `SELECT count(*)::text AS n FROM pg_locks WHERE locktype = 'advisory'`,
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

  it('no lock outlives the call: an open transaction that drew IDs blocks nobody', async () => {
    const holder = new pg.Client({ connectionString: url })
    const other = new pg.Client({ connectionString: url })
    await holder.connect()
    await other.connect()
    try {
      await raw(
        url,
        'CREATE TABLE IF NOT EXISTS held (id bigint PRIMARY KEY DEFAULT shard_5.next_id())',
      )
      await holder.query('BEGIN')
      // Let the sequence fall behind so the call moves it forward (the path that takes a lock).
      await new Promise((resolve) => setTimeout(resolve, 30))
      await holder.query('INSERT INTO held DEFAULT VALUES')
      const pid = (await holder.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number
      const advisory = await raw<{ n: string }>(
        url,
        `SELECT count(*)::text AS n FROM pg_locks WHERE pid = $1 AND locktype = 'advisory'`,
        [pid],
      )
      expect(advisory[0]!.n).toBe('0')
      await other.query(`SET statement_timeout = '5s'`)
      await new Promise((resolve) => setTimeout(resolve, 30))
      await other.query('INSERT INTO held SELECT FROM generate_series(1, 100)')
      const rows = await other.query('SELECT x::text FROM shard_5.next_ids(10) x')
      expect(rows.rowCount).toBe(10)
      await holder.query('COMMIT')
      const [n] = await raw<{ n: string }>(url, 'SELECT count(*)::text AS n FROM held')
      expect(n!.n).toBe('101')
    } finally {
      await holder.end()
      await other.end()
    }
  })
})
