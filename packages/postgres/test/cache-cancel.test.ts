import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { installPostgres } from '../src/index'
import { createDatabase, dropDatabase, holdMoveLock, raw, sharding } from './helpers'

/**
 * Sequence CACHE above 1 and draws cut short: with CACHE a session keeps a block of values between
 * calls, and a draw cancelled between its `nextval` and its seqlock check never gets to throw away
 * a block it took while the sequence was being moved. A move made by hand overlaps a draw that is
 * then timed out; the session's next draws must all be above the move.
 */
const DB = 'sf_pg_cache_cancel'
let url: string
let pool: pg.Pool

beforeAll(async () => {
  url = await createDatabase(DB)
  pool = new pg.Pool({ connectionString: url, max: 4 })
  pool.on('error', () => undefined) // terminated by DROP DATABASE ... FORCE at teardown
  // A wide margin: a value taken a while ago is still close enough to the clock to be handed out
  // (with the default 50 ms, a block left behind long enough is used up by catch-ups instead).
  await installPostgres(pool, { sharding, shards: [14], cache: 20, marginMs: 5000 })
})
afterAll(async () => {
  await pool.end()
  await dropDatabase(DB)
})

const ids = (rows: { id: string }[]) => rows.map((row) => BigInt(row.id))

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
