import {
  ClockMovedBackwardsError,
  ConfigurationError,
  defineLayout,
  defineSharding,
  InvalidIdentifierError,
  instagram,
  ShardingMismatchError,
  ShardMap,
  ShardOutOfRangeError,
} from '@shardflake/core'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest'
import { installPostgres, PostgresSource, type SqlClient } from '../src/index'
import { createDatabase, dropDatabase, raw, sharding } from './helpers'

/**
 * Logical shards 0-3 on database A and 4-7 on database B: B is on a second, real PostgreSQL
 * server started by the global setup (a throwaway cluster on a free port).
 */
const DB_A = 'sf_pg_source_a'
const DB_B = 'sf_pg_source_b'
const secondServer = inject('secondServerUrl')
let urlA: string
let urlB: string
let poolA: pg.Pool
let poolB: pg.Pool

/** Counts the ID fetches (`next_ids` round trips) and the other statements a client is sent. */
function counting(client: SqlClient): SqlClient & { count: number; other: number } {
  const wrapper = {
    count: 0,
    other: 0,
    query(text: string, params?: unknown[]) {
      if (text.includes('next_ids')) wrapper.count++
      else wrapper.other++
      return client.query(text, params)
    },
  }
  return wrapper
}

beforeAll(async () => {
  urlA = await createDatabase(DB_A)
  urlB = await createDatabase(DB_B, secondServer)
  poolA = new pg.Pool({ connectionString: urlA, max: 8 })
  poolA.on('error', () => undefined) // terminated by DROP DATABASE ... FORCE at teardown
  poolB = new pg.Pool({ connectionString: urlB, max: 8 })
  poolB.on('error', () => undefined)
  await installPostgres(poolA, { sharding, shards: '0-3' })
  await installPostgres(poolB, { sharding, shards: '4-7' })
})
afterAll(async () => {
  await poolA.end()
  await poolB.end()
  await dropDatabase(DB_A)
  await dropDatabase(DB_B, secondServer)
})

describe('PostgresSource over two physical databases', () => {
  it('runs on two different servers when the global setup could start one', async () => {
    const [a] = await raw<{ port: number }>(urlA, `SELECT current_setting('port')::int AS port`)
    const [b] = await raw<{ port: number }>(urlB, `SELECT current_setting('port')::int AS port`)
    if (inject('secondServerUrl')) expect(b!.port).not.toBe(a!.port)
    else expect(urlB).not.toBe(urlA)
  })

  it('fetches each shard from the database holding it, and routes rows with poolFor/poolForId', async () => {
    const map = new ShardMap<SqlClient>(sharding, [
      { from: 0, to: 3, target: poolA },
      { from: 4, to: 7, target: poolB },
    ])
    const source = new PostgresSource({ sharding, databases: map })
    expect(source.shardMap).toBe(map)
    for (const shard of [1, 6]) {
      const ids = await source.nextIds(shard, 500)
      expect(new Set(ids).size).toBe(500)
      for (const id of ids) expect(instagram.shardOf(id)).toBe(shard)
      await source
        .poolForId(ids[0]!)
        .query(`CREATE TABLE IF NOT EXISTS shard_${shard}.posts (id bigint PRIMARY KEY)`)
      await source
        .poolForId(ids[0]!)
        .query(`INSERT INTO shard_${shard}.posts SELECT unnest($1::bigint[])`, [ids.map(String)])
    }
    expect(source.poolFor(2)).toBe(poolA)
    expect(source.poolFor(7)).toBe(poolB)
    // The rows and the sequences are where the map says, verified with raw connections.
    const [inA] = await raw<{ n: string }>(urlA, 'SELECT count(*)::text AS n FROM shard_1.posts')
    const [inB] = await raw<{ n: string }>(urlB, 'SELECT count(*)::text AS n FROM shard_6.posts')
    expect([inA!.n, inB!.n]).toEqual(['500', '500'])
    const [missing] = await raw<{ present: boolean }>(
      urlA,
      `SELECT to_regnamespace('shard_6') IS NOT NULL AS present`,
    )
    expect(missing!.present).toBe(false)
    await expect(source.nextId(8)).rejects.toBeInstanceOf(ShardOutOfRangeError)
    expect(() => source.poolFor(9)).toThrow(ShardOutOfRangeError)
  })

  it('returns IDs above 2^53 exactly (strings to bigint, never number)', async () => {
    const source = new PostgresSource({ sharding, databases: poolA })
    const ids = await source.nextIds(2, 50)
    const last = ids.at(-1)!
    const [row] = await raw<{ max: string }>(
      urlA,
      `SELECT (last_value)::text AS max FROM shard_2.id_seq`,
    )
    // The sequence's last value, composed in TypeScript, is the last ID handed out.
    const value = BigInt(row!.max)
    const expected = instagram.compose({
      timestamp: Number(value >> 10n) + instagram.epoch,
      shard: 2,
      sequence: Number(value & 1023n),
    })
    expect(last).toBe(expected)
    expect(last > 2n ** 53n).toBe(true)
  })

  it('prefetch: single IDs cost one round trip per buffer, and stale buffers are dropped', async () => {
    const client = counting(poolA)
    const source = new PostgresSource({
      sharding,
      databases: client,
      prefetch: { size: 20, maxAgeMs: 200, refillAhead: false },
    })
    const singles = await Promise.all(Array.from({ length: 40 }, () => source.nextId(3)))
    expect(new Set(singles).size).toBe(40)
    expect(client.count).toBe(2)
    const ascending = [...singles].sort((a, b) => (a < b ? -1 : 1))
    expect(singles).toEqual(ascending)
    const one = await source.nextId(3) // buffer empty: one more trip
    expect(client.count).toBe(3)
    await new Promise((resolve) => setTimeout(resolve, 300))
    // The database's own clock before the refetch: a fresh ID is at most the sequence's margin
    // (marginMs, 50 ms) behind it, whatever the clock of this process says.
    const [clock] = await raw<{ now: string }>(urlA, 'SELECT shardflake.now_ms()::text AS now')
    const fresh = await source.nextId(3) // the 19 left are too old: dropped, refetched
    expect(client.count).toBe(4)
    expect(fresh > one).toBe(true)
    expect(instagram.decompose(fresh).timestampMs).toBeGreaterThanOrEqual(Number(clock!.now) - 50)
  })

  it('prefetch refills ahead: a stream of single IDs and batches, ascending across refills, one trip per size IDs', async () => {
    const client = counting(poolA)
    const source = new PostgresSource({ sharding, databases: client, prefetch: { size: 20 } })
    const ids: bigint[] = []
    for (let i = 0; i < 100; i++) {
      if (i % 10 === 9) ids.push(...(await source.nextIds(2, 5)))
      else ids.push(await source.nextId(2))
    }
    expect(ids).toHaveLength(140)
    expect(new Set(ids).size).toBe(140)
    expect([...ids].sort((a, b) => (a < b ? -1 : 1))).toEqual(ids)
    expect(ids.every((id) => instagram.shardOf(id) === 2)).toBe(true)
    // 140 IDs in fetches of 20; the last refill may still be out.
    await vi.waitFor(() => expect(client.count).toBeGreaterThanOrEqual(7))
    expect(client.count).toBeLessThanOrEqual(8)
    await source.close()
  })

  it('prefetch refilling ahead, hammered: two sources, 16 concurrent callers, never the same ID twice', async () => {
    // Small buffers, so that refills run all the time, also while callers wait for them.
    const sources = [0, 1].map(
      () => new PostgresSource({ sharding, databases: poolA, prefetch: { size: 7 } }),
    )
    const drawn: bigint[] = []
    let descents = 0
    await Promise.all(
      Array.from({ length: 16 }, async (_, caller) => {
        const source = sources[caller % 2]!
        const last = new Map<number, bigint>()
        for (let i = 0; i < 60; i++) {
          const shard = (caller + i) % 3
          const count = (caller * 7 + i) % 5 === 0 ? 1 + ((caller + i) % 12) : 1
          const ids =
            count === 1 ? [await source.nextId(shard)] : await source.nextIds(shard, count)
          for (const id of ids) {
            if (instagram.shardOf(id) !== shard) throw new Error(`${id} is not on shard ${shard}`)
            if ((last.get(shard) ?? -1n) >= id) descents++
            last.set(shard, id)
            drawn.push(id)
          }
        }
      }),
    )
    expect(drawn.length).toBeGreaterThan(16 * 60)
    expect(new Set(drawn).size).toBe(drawn.length)
    expect(descents).toBe(0)
    await Promise.all(sources.map((source) => source.close()))
  })

  it('checks the layout recorded in each database once, and refuses another one', async () => {
    const client = counting(poolA)
    const source = new PostgresSource({ sharding, databases: client })
    await source.nextIds(1, 3)
    const checks = client.other
    expect(checks).toBeGreaterThan(0)
    await source.nextIds(2, 3)
    await source.nextId(1)
    expect(client.other).toBe(checks)
    expect(client.count).toBe(3)

    const other = defineLayout({
      epoch: '2024-01-01T00:00:00Z',
      timeBits: 41,
      shardBits: 13,
      sequenceBits: 10,
    })
    const wrong = new PostgresSource({
      sharding: defineSharding({ layout: other, logicalShards: 2000 }),
      databases: poolA,
    })
    const error = await wrong.nextIds(1, 3).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ShardingMismatchError)
    expect((error as Error).message).toMatch(
      /database "sf_pg_source_a_\w+" uses layout "instagram".*2011-08-24.*this application uses layout "custom".*2024-01-01T00:00:00.000Z/,
    )
    await expect(wrong.nextId(1)).rejects.toBeInstanceOf(ShardingMismatchError)

    // The same layout over another number of logical shards: keys would land elsewhere.
    const fewer = new PostgresSource({
      sharding: defineSharding({ layout: instagram, logicalShards: 64 }),
      databases: poolA,
    })
    const count = await fewer.nextIds(1, 3).catch((e: unknown) => e)
    expect(count).toBeInstanceOf(ShardingMismatchError)
    expect((count as Error).message).toMatch(
      /with logicalShards 2000, but .* with logicalShards 64/,
    )

    // A shard of the logical shards that no database holds: the message names logicalShards.
    const unmapped = await new PostgresSource({ sharding, databases: poolA })
      .nextId(sharding.shardForKey(4777n))
      .catch((e: unknown) => e)
    expect(unmapped).toBeInstanceOf(ConfigurationError)
    expect((unmapped as Error).message).toMatch(
      /Logical shard 777 is not installed.*installPostgres.*logicalShards: this source spreads keys over 2000/,
    )

    const elsewhere = new PostgresSource({ sharding, databases: poolA, schema: 'nowhere' })
    await expect(elsewhere.nextId(1)).rejects.toThrow(
      /No shardflake installation is recorded in schema "nowhere"/,
    )
    expect(() => new PostgresSource({ sharding, databases: poolA, schema: 'x"; --' })).toThrow(
      InvalidIdentifierError,
    )
  })

  it('refuses shards whose installed next_id() is older than version 8 until installPostgres runs again', async () => {
    const url = await createDatabase('sf_pg_source_old')
    const pool = new pg.Pool({ connectionString: url, max: 2 })
    pool.on('error', () => undefined)
    try {
      await installPostgres(pool, { sharding, shards: '0-3' })
      // As an installation of version 7 records itself (its functions repeat IDs in a rare race).
      await raw(url, `UPDATE shardflake.shards SET version = '7' WHERE shard IN (1, 3)`)
      const source = new PostgresSource({ sharding, databases: pool })
      const error = await source.nextIds(2, 3).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(ConfigurationError)
      expect((error as Error).message).toMatch(
        /logical shards 1 \(7\), 3 \(7\).*needs version 8 or later: run installPostgres there again/,
      )
      // Nothing was drawn: the sequences did not move.
      const [drawn] = await raw<{ n: string }>(
        url,
        `SELECT count(*)::text AS n FROM pg_sequences WHERE sequencename = 'id_seq' AND last_value IS NOT NULL`,
      )
      expect(drawn!.n).toBe('0')
      await installPostgres(pool, { sharding, shards: '0-3' })
      expect(await source.nextIds(2, 3)).toHaveLength(3)
      await source.close()
    } finally {
      await pool.end()
      await dropDatabase('sf_pg_source_old')
    }
  })

  it('uses the caller connection (context.query) when told to', async () => {
    const client = counting(poolA)
    const source = new PostgresSource({
      sharding,
      databases: client,
      useContextQuery: true,
    })
    const caller = await poolA.connect()
    const seen: string[] = []
    try {
      await caller.query('BEGIN')
      const ids = await source.nextIds(0, 5, {
        query: async (sql, params) => {
          seen.push(sql)
          return (await caller.query(sql, [...params])).rows
        },
      })
      await caller.query('ROLLBACK') // the sequence is not transactional: IDs stay used
      expect(ids).toHaveLength(5)
      const after = await source.nextIds(0, 1)
      expect(after[0]! > ids[4]!).toBe(true)
    } finally {
      caller.release()
    }
    expect(seen).toHaveLength(1)
    expect(client.count).toBe(1)

    // With a prefetch buffer too, a call on the caller's connection draws exactly what it
    // returns there, and the shared buffer is filled through the pool only.
    const buffered = new PostgresSource({
      sharding,
      databases: client,
      useContextQuery: true,
      prefetch: { size: 50 },
    })
    const onCaller: string[] = []
    const direct = await buffered.nextIds(0, 3, {
      query: async (sql, params) => {
        onCaller.push(sql)
        return (await poolA.query(sql, [...params])).rows
      },
    })
    expect(direct).toHaveLength(3)
    expect(onCaller).toHaveLength(1)
    const countBefore = client.count
    const pooled = [await buffered.nextId(0), await buffered.nextId(0)]
    expect(client.count - countBefore).toBe(1)
    expect(pooled[0]! > direct[2]!).toBe(true)
  })

  it('a clock stepped back further than the function may wait: ClockMovedBackwardsError, nothing issued', async () => {
    await installPostgres(poolA, {
      sharding,
      schema: 'sf_clock',
      schemaPrefix: 'clk_',
      shards: [1],
      maxDriftMs: 100,
      maxWaitMs: 200,
    })
    const source = new PostgresSource({ sharding, databases: poolA, schemaPrefix: 'clk_' })
    const before = await source.nextIds(1, 10)
    const setClock = (offset: number) =>
      raw(
        urlA,
        `CREATE OR REPLACE FUNCTION sf_clock.now_ms() RETURNS bigint LANGUAGE sql VOLATILE AS $$
           SELECT floor(date_part('epoch', clock_timestamp()) * 1000)::bigint + (${offset}) $$`,
      )
    await setClock(-5000)
    const [seqBefore] = await raw<{ v: string }>(
      urlA,
      'SELECT last_value::text AS v FROM clk_1.id_seq',
    )
    const error = await source.nextIds(1, 10).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ClockMovedBackwardsError)
    expect((error as ClockMovedBackwardsError).behindMs).toBeGreaterThan(4000)
    await setClock(0)
    const after = await source.nextIds(1, 10)
    expect(after[0]! > before[9]!).toBe(true)
    const [seqAfter] = await raw<{ v: string }>(
      urlA,
      'SELECT last_value::text AS v FROM clk_1.id_seq',
    )
    expect(BigInt(seqAfter!.v) > BigInt(seqBefore!.v)).toBe(true)
  })

  it('the first draws of fresh shards, and of shards idle for an hour, carry the current time, even when they meet', async () => {
    await installPostgres(poolA, {
      sharding,
      schema: 'sf_fresh',
      schemaPrefix: 'fresh_',
      shards: '0-16',
    })
    const source = new PostgresSource({
      sharding,
      databases: poolA,
      timeoutMs: 10_000,
      schema: 'sf_fresh',
      schemaPrefix: 'fresh_',
    })
    const clock = async () =>
      Number((await raw<{ now: string }>(urlA, 'SELECT sf_fresh.now_ms()::text AS now'))[0]!.now)
    await source.nextIds(16, 1) // the sharding check, before the calls that meet
    /** 8 concurrent calls on each of 16 shards (8 connections); the oldest time any ID carries. */
    const oldest = async () => {
      const batches = await Promise.all(
        Array.from({ length: 16 * 8 }, (_, i) => source.nextIds(Math.floor(i / 8), 7)),
      )
      return Math.min(...batches.flat().map((id) => sharding.layout.decompose(id).timestampMs))
    }
    // Fresh: an ID is at most marginMs (50 ms) behind the database's clock.
    const before = await clock()
    expect(await oldest()).toBeGreaterThanOrEqual(before - 50)
    // An hour later (the database's clock moved forward): no call returns the hour-old values.
    await raw(
      urlA,
      `CREATE OR REPLACE FUNCTION sf_fresh.now_ms() RETURNS bigint LANGUAGE sql VOLATILE AS $$
         SELECT floor(date_part('epoch', clock_timestamp()) * 1000)::bigint + 3600000 $$`,
    )
    const later = await clock()
    expect(await oldest()).toBeGreaterThanOrEqual(later - 50)
  })
})
