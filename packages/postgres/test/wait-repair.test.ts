import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { installPostgres } from '../src/index'
import { moveLockKey, resolveSqlOptions } from '../src/sql/options'
import { createDatabase, dropDatabase, raw, sharding } from './helpers'

/**
 * A move of the sequence cut short (a cancel, a statement_timeout, a session that died) leaves
 * `id_gen` "not called"; the next session waiting for it takes that generation's move lock and
 * repairs it. Between its read of `id_gen` and the lock, another session may have repaired the
 * same generation and begun a move of the next one. The waiter must not end that live move: a
 * third session would then move the sequence from the same last value, and hand out the live
 * move's values a second time.
 *
 * The waiter is paused at that exact point by a `pg_try_advisory_xact_lock(int, int)` of its own,
 * found first on its `search_path` (a stand-in that waits for the test, then takes the real lock).
 */
const DB = 'sf_pg_wait_repair'
const SHARD = 15
let url: string
let pool: pg.Pool

beforeAll(async () => {
  url = await createDatabase(DB)
  pool = new pg.Pool({ connectionString: url, max: 2 })
  pool.on('error', () => undefined) // terminated by DROP DATABASE ... FORCE at teardown
  // A wide margin: a reservation starts right after the last value, not at the clock.
  await installPostgres(pool, { sharding, shards: [SHARD], marginMs: 60_000 })
  await raw(
    url,
    `CREATE SCHEMA hook;
     CREATE SEQUENCE hook.paused; CREATE SEQUENCE hook.go; CREATE SEQUENCE hook.locks_taken;
     CREATE FUNCTION hook.pg_try_advisory_xact_lock(a integer, b integer) RETURNS boolean
     LANGUAGE plpgsql VOLATILE AS $$
     DECLARE
       ok boolean;
     BEGIN
       IF current_setting('test.pause_lock', true) = 'on' THEN
         PERFORM set_config('test.pause_lock', 'off', false);
         PERFORM nextval('hook.paused');
         FOR i IN 1 .. 30000 LOOP
           EXIT WHEN pg_sequence_last_value('hook.go') IS NOT NULL;
           PERFORM pg_sleep(0.002);
         END LOOP;
       END IF;
       ok := pg_catalog.pg_try_advisory_xact_lock(a, b);
       PERFORM nextval('hook.locks_taken');
       RETURN ok;
     END
     $$;`,
  )
})
afterAll(async () => {
  await pool.end()
  await dropDatabase(DB)
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Polls `check` (a raw-SQL read) every 5 ms until it is true; fails after 60 s. */
async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 12_000; i++) {
    if (await check()) return
    await sleep(5)
  }
  throw new Error(`timed out waiting for ${what}`)
}

async function sequenceValue(name: string): Promise<bigint | null> {
  const [row] = await raw<{ v: string | null }>(
    url,
    `SELECT pg_sequence_last_value('${name}')::text AS v`,
  )
  return row!.v === null ? null : BigInt(row!.v)
}

/** The sequence value (ID space) an instagram ID was made from: time << 10 | sequence. */
const sequenceValueOf = (id: bigint) => ((id >> 23n) << 10n) | (id & 1023n)

describe('a waiter repairing a move cut short', () => {
  it('never ends a live move of the next generation: no value of that move is handed out twice', async () => {
    const gen = `shard_${SHARD}.id_gen`
    const seq = `shard_${SHARD}.id_seq`
    await raw(url, `SELECT shard_${SHARD}.next_id()`)
    const g = (await sequenceValue(gen))!
    const lockKey = (generation: bigint) =>
      moveLockKey(resolveSqlOptions({ sharding }), SHARD, generation)
    const cutShort = new pg.Client({ connectionString: url })
    const mover = new pg.Client({ connectionString: url })
    const waiter = new pg.Client({ connectionString: url })
    const third = new pg.Client({ connectionString: url })
    for (const client of [cutShort, mover, waiter, third]) await client.connect()
    try {
      // A move of generation g that stopped half-way: its lock held, id_gen "not called".
      await cutShort.query('BEGIN')
      await cutShort.query('SELECT pg_advisory_xact_lock($1, $2)', lockKey(g))
      await cutShort.query(`SELECT setval('${gen}', $1::bigint, false)`, [g.toString()])
      // A draw finds it, reads generation g in _wait_gen, and pauses before taking g's lock.
      await waiter.query(`SET search_path = hook, pg_catalog, public`)
      await waiter.query(`SET test.pause_lock = 'on'`)
      const draw = waiter
        .query<{ id: string }>(`SELECT shard_${SHARD}.next_id()::text AS id`)
        .then((result) => BigInt(result.rows[0]!.id))
      await until('the waiter to pause', async () => (await sequenceValue('hook.paused')) !== null)
      // Meanwhile generation g is repaired (its lock then let go), and a move of generation g + 1
      // begins: its lock, id_gen "not called", the sequence's last value (as a reservation does).
      await cutShort.query(`SELECT setval('${gen}', $1::bigint + 1, true)`, [g.toString()])
      await cutShort.query('COMMIT')
      await mover.query('BEGIN')
      await mover.query('SELECT pg_advisory_xact_lock($1, $2)', lockKey(g + 1n))
      await mover.query(`SELECT setval('${gen}', $1::bigint + 1, false)`, [g.toString()])
      const last = (await sequenceValue(seq))!
      // The waiter goes on: it takes g's lock (free now) and reads id_gen again.
      await raw(url, `SELECT setval('hook.go', 1)`)
      let drawn = false
      void draw.then(() => {
        drawn = true
      })
      await until(
        'the waiter to go on',
        async () => drawn || ((await sequenceValue('hook.locks_taken')) ?? 0n) >= 2n,
      )
      // A third session reserves 200 values while the move of g + 1 is still running.
      const reserved = third
        .query<{ id: string }>(`SELECT x::text AS id FROM shard_${SHARD}.next_ids(200) x`)
        .then((result) => result.rows.map((row) => sequenceValueOf(BigInt(row.id))))
      await sleep(300)
      // The move of g + 1 ends: its range is last + 1 .. last + 1000.
      const moved = last + 1000n
      await mover.query(`SELECT setval('${seq}', $1::bigint, true)`, [moved.toString()])
      await mover.query(`SELECT setval('${gen}', $1::bigint + 2, true)`, [g.toString()])
      await mover.query('COMMIT')
      const values = await reserved
      expect(values).toHaveLength(200)
      expect(
        values.filter((value) => value <= moved),
        'values of the live move reserved again',
      ).toEqual([])
      expect(sequenceValueOf(await draw)).toBeGreaterThan(moved)
    } finally {
      for (const client of [cutShort, mover, waiter, third]) await client.end().catch(() => {})
    }
  })
})
