import { instagram } from '@shardflake/core'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { installPostgres } from '../src/index'
import { resolveSqlOptions } from '../src/sql/options'
import { createDatabase, dropDatabase, holdMoveLock, raw, sharding } from './helpers'

/**
 * Sequence CACHE above 1 and draws cut short: with CACHE a session keeps a block of values between
 * calls, and a draw cancelled between its `nextval` and its seqlock check never gets to throw away
 * a block it took while the sequence was being moved. Sessions draw from two shards while another
 * connection cancels draws at random (and statement_timeout cuts others), reservations and
 * catch-ups move the sequence, and the clock read pauses now and then (a backend descheduled there:
 * in a draw that is between `nextval` and the check, in a move between reading the sequence and
 * setting it). Every acknowledged ID is collected and counted. It found two defects: version 6
 * handed out a reserved range twice with CACHE above 1 (a block left by a draw cut short), and
 * version 7 with any CACHE (a waiter that ended a live move while repairing one cut short: see
 * `wait-repair.test.ts`).
 */
const DB = 'sf_pg_cache_cancel'
let url: string
let pool: pg.Pool

beforeAll(async () => {
  url = await createDatabase(DB)
  pool = new pg.Pool({ connectionString: url, max: 16 })
  pool.on('error', () => undefined) // terminated by DROP DATABASE ... FORCE at teardown
  // A wide margin: a value taken a while ago is still close enough to the clock to be handed out
  // (with the default 50 ms, a block left behind long enough is used up by catch-ups instead).
  const o = { sharding, maxWaitMs: 2000, marginMs: 1000 }
  await installPostgres(pool, { ...o, shards: [11] })
  await installPostgres(pool, { ...o, shards: [12, 13], cache: 20 })
  await installPostgres(pool, { sharding, shards: [14], cache: 20, marginMs: 5000 })
})
afterAll(async () => {
  await pool.end()
  await dropDatabase(DB)
})

const ids = (rows: { id: string }[]) => rows.map((row) => BigInt(row.id))
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * The clock next_id() reads: the real clock plus `offsetMs`; with `pauses`, a read pauses 2 ms
 * first (the backend stalls right there) in every other draw, and always inside a move (a
 * transaction that moved a sequence: between reading the sequence and setting it, for a
 * reservation or a catch-up).
 */
async function setClock(offsetMs: number, pauses = false): Promise<void> {
  const pause = pauses
    ? `IF random() < 0.5 OR current_setting('shardflake.moves', true) <> '' THEN PERFORM pg_sleep(0.002); END IF;`
    : ''
  await raw(
    url,
    `CREATE OR REPLACE FUNCTION shardflake.now_ms() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
     BEGIN
       ${pause}
       RETURN floor(date_part('epoch', clock_timestamp()) * 1000)::bigint + (${offsetMs});
     END
     $$`,
  )
}

async function generation(shard: number): Promise<bigint> {
  const [row] = await raw<{ g: string }>(
    url,
    `SELECT last_value::text AS g FROM shard_${shard}.id_gen`,
  )
  return BigInt(row!.g)
}

describe.each([
  { shards: [11], cache: 1 },
  { shards: [12, 13], cache: 20 },
])('CACHE $cache: draws cancelled at random while the sequence moves', ({ shards }) => {
  it('every acknowledged ID is distinct, and ascending within a session and shard', async () => {
    const { reserveFrom } = resolveSqlOptions({ sharding })
    const tables = shards.map((shard) => `cc_${shard}`)
    for (const [i, shard] of shards.entries()) {
      await raw(
        url,
        `CREATE TABLE ${tables[i]} (id bigint PRIMARY KEY DEFAULT shard_${shard}.next_id(), session int NOT NULL)`,
      )
    }
    const gensBefore = await Promise.all(shards.map(generation))
    await setClock(0, true)
    // At least 8 s, and on a loaded machine until enough happened (at most 90 s).
    const runMs = 8000
    const maxRunMs = 90_000
    const start = Date.now()
    let done = false
    const pids: number[] = []
    const codes = new Map<string, number>()
    let reservations = 0
    let acknowledged = 0
    let insertedCount = 0
    let cancelled = 0
    const descents: string[] = []
    const clients = await Promise.all(Array.from({ length: 12 }, () => pool.connect()))
    for (const [session, client] of clients.entries()) {
      pids.push((await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number)
      // A third of the sessions also run under a statement_timeout that the pauses trip.
      if (session % 3 === 0) await client.query(`SET statement_timeout = '3ms'`)
    }
    const sessions = clients.map(async (client, session) => {
      const got = new Map<number, bigint[]>(shards.map((shard) => [shard, []]))
      const inserted: bigint[] = []
      const origins: [bigint, string][] = []
      try {
        for (let round = 0; !done; round++) {
          const which = (round + session) % shards.length
          const shard = shards[which]!
          const op = (round * 7 + session) % 6
          let sql: string
          if (op === 0) sql = `SELECT shard_${shard}.next_id()::text AS id`
          else if (op === 1)
            sql = `SELECT shard_${shard}.next_id()::text AS id FROM generate_series(1, 40)`
          else if (op === 2) sql = `SELECT x::text AS id FROM shard_${shard}.next_ids(9) x`
          else if (op === 3)
            sql = `INSERT INTO ${tables[which]} (session) SELECT ${session} FROM generate_series(1, 5) RETURNING id::text AS id`
          else {
            sql = `SELECT x::text AS id FROM shard_${shard}.next_ids(${reserveFrom + ((round * 13) % 200)}) x`
          }
          try {
            const batch = ids((await client.query(sql)).rows)
            const mine = got.get(shard)!
            // Within a session IDs of a shard keep growing.
            const previous = mine[mine.length - 1]
            if (previous !== undefined && batch[0]! <= previous) {
              descents.push(`session ${session}: ${batch[0]} (${sql}) after ${previous}`)
            }
            mine.push(...batch)
            acknowledged += batch.length
            const at = `session ${session}, ${Date.now() - start} ms, ${sql}`
            for (const [k, id] of batch.entries()) origins.push([id, `${at} [${k}]`])
            if (op === 3) {
              inserted.push(...batch)
              insertedCount += batch.length
            }
            // Each reservation answered was a move of the sequence.
            if (op >= 4) reservations++
          } catch (error) {
            const code = String((error as { code?: unknown }).code)
            codes.set(code, (codes.get(code) ?? 0) + 1)
            // Cancelled (by hand or by the timeout): nothing was acknowledged. Anything else fails.
            if (code !== '57014') throw error
          }
        }
      } finally {
        await client.query('RESET statement_timeout').catch(() => undefined)
        client.release()
      }
      return { got, inserted, origins }
    })
    // Cancels draws at random, mostly where one pauses (in the clock read, or waiting for a move).
    const canceller = (async () => {
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      try {
        while (!done) {
          const { rows } = await client.query(
            `SELECT pg_cancel_backend(pid) AS ok FROM pg_stat_activity
             WHERE pid = ANY($1::int[]) AND state = 'active' AND (wait_event = 'PgSleep' OR random() < 0.2)
             ORDER BY random() LIMIT 1`,
            [pids],
          )
          if (rows[0]?.ok) cancelled++
          await sleep(Math.floor(Math.random() * 2))
        }
      } finally {
        await client.end()
      }
    })()
    // The clock jumps forward now and then: every sequence is then far behind it (catch-ups).
    let offset = 0
    const enough = () =>
      acknowledged > 5000 * shards.length &&
      cancelled > 20 &&
      (codes.get('57014') ?? 0) > 100 &&
      reservations > 100 &&
      insertedCount > 150
    while (Date.now() - start < runMs || (!enough() && Date.now() - start < maxRunMs)) {
      await sleep(500)
      offset += 1200
      await setClock(offset, true)
    }
    done = true
    const results = await Promise.all(sessions)
    await canceller
    await setClock(0)
    const inserted = results.flatMap((r) => r.inserted)
    // Every ID handed out twice, with where each came from (the first 10).
    const firstOrigin = new Map<bigint, string>()
    const repeats: string[] = []
    for (const [id, origin] of results.flatMap((r) => r.origins)) {
      const first = firstOrigin.get(id)
      if (first === undefined) firstOrigin.set(id, origin)
      else repeats.push(`${id}: ${first} | ${origin}`)
    }
    expect(repeats.slice(0, 10), `${repeats.length} IDs handed out twice`).toEqual([])
    expect(descents.slice(0, 10), `${descents.length} IDs not above the session's last`).toEqual([])
    for (const shard of shards) {
      const all = results.flatMap((r) => r.got.get(shard)!)
      expect(all.length).toBeGreaterThan(5000)
      expect(all.length - new Set(all).size, `IDs of shard ${shard} handed out twice`).toBe(0)
      for (const id of all.slice(0, 2000)) expect(instagram.shardOf(id)).toBe(shard)
    }
    // Many draws really were cut short, and the sequences really moved meanwhile.
    expect(cancelled, 'cancels sent').toBeGreaterThan(20)
    expect(codes.get('57014') ?? 0, 'draws cancelled').toBeGreaterThan(100)
    expect(reservations, 'reservations').toBeGreaterThan(100)
    for (const [i, shard] of shards.entries()) {
      expect(await generation(shard), 'moves').toBeGreaterThan(gensBefore[i]! + 100n)
      const [count] = await raw<{ n: string; d: string }>(
        url,
        `SELECT count(*)::text AS n, count(DISTINCT id)::text AS d FROM ${tables[i]}`,
      )
      expect(count!.n).toBe(count!.d)
    }
    // Rows through DEFAULT next_id() (5 per INSERT: a longer one, pausing in every other draw,
    // was nearly always cancelled on a loaded machine: 360 rows in 90 s once).
    expect(inserted.length).toBeGreaterThan(150)
  }, 180_000)
})

/** The sequence value (ID space) an instagram ID was made from: time << 10 | sequence. */
const sequenceValue = (id: bigint) => ((id >> 23n) << 10n) | (id & 1023n)

describe('CACHE 20: a draw cut short between nextval and its check, inside a move', () => {
  it.each([
    { next: 'next_id()', sql: 'SELECT shard_14.next_id()::text AS id FROM generate_series(1, 30)' },
    { next: 'next_ids(30)', sql: 'SELECT x::text AS id FROM shard_14.next_ids(30) x' },
  ])(
    'leaves no block of values behind: the session’s next $next is above the move',
    async ({ sql }) => {
      // The clock read pauses in sessions that ask for it: a draw stalls after its nextval.
      await raw(
        url,
        `CREATE OR REPLACE FUNCTION shardflake.now_ms() RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
       BEGIN
         IF current_setting('test.pause', true) = 'on' THEN PERFORM pg_sleep(0.3); END IF;
         RETURN floor(date_part('epoch', clock_timestamp()) * 1000)::bigint;
       END
       $$`,
      )
      const mover = new pg.Client({ connectionString: url })
      const drawer = new pg.Client({ connectionString: url })
      await mover.connect()
      await drawer.connect()
      try {
        // The sequence at the clock (a catch-up); the drawer's session holds no block yet (it never
        // drew): its next nextval takes one.
        await raw(url, 'SELECT shard_14.next_id()')
        // The mover's first steps (as a reservation of 1000 values makes them): the lock, id_gen
        // "not called", the sequence's last value.
        const unlock = await holdMoveLock(mover, 14)
        const g = (await mover.query('SELECT last_value::text AS g FROM shard_14.id_gen')).rows[0]
          .g as string
        await mover.query(`SELECT setval('shard_14.id_gen', $1::bigint, false)`, [g])
        const last = BigInt(
          (await mover.query('SELECT last_value::text AS v FROM shard_14.id_seq')).rows[0]
            .v as string,
        )
        // Meanwhile a draw takes a block of 20 values (last+1 ..), then stalls and is cancelled by
        // its statement_timeout before it checks the generation.
        await drawer.query(`SET test.pause = 'on'`)
        await drawer.query(`SET statement_timeout = '100ms'`)
        const error = await drawer.query('SELECT shard_14.next_id()').catch((e: unknown) => e)
        expect((error as { code?: string }).code).toBe('57014')
        await drawer.query('RESET statement_timeout')
        await drawer.query('RESET test.pause')
        // The move: the mover's range is last+1 .. last+1000, then a new generation.
        const target = last + 1000n
        await mover.query(`SELECT setval('shard_14.id_seq', $1::bigint, true)`, [target.toString()])
        await mover.query(`SELECT setval('shard_14.id_gen', $1::bigint + 1, true)`, [g])
        await unlock()
        const after = ids((await drawer.query(sql)).rows)
        expect(after).toHaveLength(30)
        // None of them is one of the mover's values.
        expect(after.filter((id) => sequenceValue(id) <= target)).toEqual([])
      } finally {
        await mover.end()
        await drawer.end()
      }
    },
  )
})
