import {
  CancelledError,
  ClockMovedBackwardsError,
  ConfigurationError,
  ConnectionLostError,
  ConnectionRefusedError,
  defineLayout,
  defineSharding,
  InvalidArgumentError,
  ShardflakeError,
  ShardingMismatchError,
  ShardMap,
  ShardOutOfRangeError,
  ShardOverloadedError,
  TimedOutError,
  TimeExhaustedError,
} from '@shardflake/core'
import mysql, { type Pool } from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createMysqlPool, installMysql, MysqlSource, type MysqlSourceOptions } from '../src'
import {
  createPool,
  dropDatabases,
  MYSQL_URL,
  RUN,
  rows,
  startMariadb,
  type ThrowawayServer,
} from './helpers'

const PREFIX = `sf_my_src_${RUN}_`
const SHARDS = `${PREFIX}s_`
// An old epoch: every ID is far above 2^53.
const layout = defineLayout({
  name: 'y2k',
  epoch: '2000-01-01T00:00:00Z',
  timeBits: 41,
  shardBits: 13,
  sequenceBits: 10,
})
const sharding = defineSharding({ layout, logicalShards: 64 })

let a: Pool
let b: Pool
let second: ThrowawayServer
let source: MysqlSource

beforeAll(async () => {
  second = await startMariadb()
  a = await createMysqlPool(MYSQL_URL)
  b = await createMysqlPool(second.url)
  await dropDatabases(a, PREFIX)
  await installMysql(a, { sharding, shards: '0-3', schemaPrefix: SHARDS })
  await installMysql(b, { sharding, shards: '4-7', schemaPrefix: SHARDS })
  source = new MysqlSource({
    sharding,
    schemaPrefix: SHARDS,
    databases: [
      { from: 0, to: 3, target: a },
      { from: 4, to: 7, target: b },
    ],
  })
})

afterAll(async () => {
  await source.close()
  await dropDatabases(a, PREFIX)
  await a.end()
  await b.end()
  await second.stop()
})

async function counter(pool: Pool, shard: number, prefix = SHARDS): Promise<bigint> {
  const [row] = await rows<{ v: string }>(pool, `SELECT v FROM \`${prefix}${shard}\`.sf_counter`)
  return BigInt(row!.v)
}

function on(pool: Pool, options: Partial<MysqlSourceOptions> = {}): MysqlSource {
  return new MysqlSource({ sharding, databases: pool, schemaPrefix: SHARDS, ...options })
}

/** The server thread running a statement that names `text`, once it shows up. */
async function threadRunning(pool: Pool, text: string): Promise<number> {
  for (;;) {
    const found = await rows<{ id: string }>(
      pool,
      `SELECT ID AS id FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND INFO NOT LIKE '%PROCESSLIST%' AND ID <> CONNECTION_ID()`,
      [`%${text}%`],
    )
    if (found[0]) return Number(found[0].id)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** Runs `body` while another session holds a write lock on a shard's counter. */
async function withCounterLocked(shard: number, body: () => Promise<void>): Promise<void> {
  const locker = await a.getConnection()
  try {
    await locker.query(`LOCK TABLES \`${SHARDS}${shard}\`.sf_counter WRITE`)
    await body()
  } finally {
    await locker.query('UNLOCK TABLES')
    locker.release()
  }
}

describe('MysqlSource', () => {
  it('routes each logical shard to its server with the shard map', async () => {
    const beforeA = await counter(a, 2)
    const beforeB = await counter(b, 6)
    const onA = await source.nextIds(2, 100)
    const onB = await source.nextIds(6, 100)
    expect(await counter(a, 2)).toBeGreaterThan(beforeA)
    expect(await counter(b, 6)).toBeGreaterThan(beforeB)
    expect(onA.every((id) => layout.shardOf(id) === 2)).toBe(true)
    expect(onB.every((id) => layout.shardOf(id) === 6)).toBe(true)
    expect(source.shardMap.targetFor(6)).toBe(b)
  })

  it('needs a sharding: the error names logicalShards', () => {
    expect(() => new MysqlSource({ databases: a } as never)).toThrow(ConfigurationError)
    expect(() => new MysqlSource({ layout, databases: a } as never)).toThrow(/logicalShards/)
    const other = defineSharding({ layout, logicalShards: 32 })
    expect(
      () => new MysqlSource({ sharding, databases: ShardMap.single(other, a as Pool | string) }),
    ).toThrow(ShardingMismatchError)
  })

  it('IDs above 2^53 arrive exact: as in the database, never through a number', async () => {
    const ids = await source.nextIds(1, 50)
    expect(ids[0]! > 2n ** 53n).toBe(true)
    await a.query(`CREATE DATABASE IF NOT EXISTS \`${PREFIX}rows\``)
    await a.query(`CREATE TABLE \`${PREFIX}rows\`.t (id BIGINT PRIMARY KEY)`)
    await a.query(`INSERT INTO \`${PREFIX}rows\`.t (id) VALUES ?`, [
      ids.map((id) => [id.toString()]),
    ])
    const stored = await rows<{ text: string }>(
      a,
      `SELECT CAST(id AS CHAR) AS text FROM \`${PREFIX}rows\`.t ORDER BY id`,
    )
    expect(stored.map((r) => r.text)).toEqual(ids.map(String))
    const lossy = mysql.createPool({ uri: MYSQL_URL })
    try {
      expect(() => on(lossy)).toThrow(ConfigurationError)
    } finally {
      await lossy.end()
    }
  })

  it('a batch is exactly the counter values one UPDATE reserved, across time-unit borders', async () => {
    const ids = await source.nextIds(3, 5000)
    const values = ids.map((id) => {
      const { time, sequence, shard } = layout.decompose(id)
      expect(shard).toBe(3)
      return BigInt(time) * 1024n + BigInt(sequence)
    })
    for (let i = 1; i < values.length; i++) expect(values[i]! - values[i - 1]!).toBe(1n)
    expect(new Set(ids.map((id) => layout.decompose(id).time)).size).toBeGreaterThan(4)
    expect(await counter(a, 3)).toBe(values[values.length - 1]! + 1n)
  })

  it('interleaves with next_id() called in SQL: one counter, ascending, same shard', async () => {
    const fromSource = await source.nextId(3)
    const [row] = await rows<{ id: string }>(a, `SELECT \`${SHARDS}3\`.next_id() AS id`)
    const fromSql = BigInt(row!.id)
    const again = await source.nextId(3)
    expect(fromSource < fromSql && fromSql < again).toBe(true)
    expect(layout.shardOf(fromSql)).toBe(3)
  })

  it('refuses shards outside its map and bad counts before any query', async () => {
    await expect(source.nextId(8)).rejects.toBeInstanceOf(ShardOutOfRangeError)
    await expect(source.nextId(64)).rejects.toBeInstanceOf(ShardOutOfRangeError)
    await expect(source.nextId(-1)).rejects.toBeInstanceOf(ShardOutOfRangeError)
    // A server nobody listens on: a count above 1,000,000 fails before it is asked anything.
    const nowhere = new MysqlSource({ sharding, databases: 'mysql://root@127.0.0.1:1/none' })
    await expect(nowhere.nextIds(1, 1_000_001)).rejects.toBeInstanceOf(InvalidArgumentError)
    await expect(nowhere.nextIds(1, 0)).rejects.toBeInstanceOf(InvalidArgumentError)
    await expect(nowhere.nextIds(1, 1)).rejects.toBeInstanceOf(ConnectionRefusedError)
    await nowhere.close()
    expect(() => on(a, { timeoutMs: 1e14 })).toThrow(InvalidArgumentError)
    expect(() => on(a, { maxWaitMs: -1 })).toThrow(InvalidArgumentError)
  })

  it('opens pools from URLs and ends them on close; pools it was given stay open', async () => {
    const fromUrl = new MysqlSource({
      sharding,
      databases: [{ from: 0, to: 3, target: MYSQL_URL }],
      schemaPrefix: SHARDS,
    })
    expect(layout.shardOf(await fromUrl.nextId(1))).toBe(1)
    await fromUrl.close()
    await expect(fromUrl.nextId(1)).rejects.toBeInstanceOf(ConfigurationError)
    const given = on(a)
    await given.nextId(1)
    await given.close()
    expect(await rows(a, 'SELECT 1 AS one')).toEqual([{ one: 1 }])
  })

  it('KILL QUERY from another session is a CancelledError; KILL CONNECTION a ConnectionLostError', async () => {
    const killed = on(a, { timeoutMs: 60_000 })
    await killed.nextId(2) // the sharding check is done: the next call is the reserve itself
    await withCounterLocked(2, async () => {
      // Each expectation is attached before the kill: the call may fail before the KILL returns.
      const cancelled = expect(killed.nextIds(2, 3)).rejects.toBeInstanceOf(CancelledError)
      await a.query(`KILL QUERY ${await threadRunning(a, `${SHARDS}2\`.\`reserve_ids`)}`)
      await cancelled
      const lost = expect(killed.nextIds(2, 3)).rejects.toBeInstanceOf(ConnectionLostError)
      await a.query(`KILL CONNECTION ${await threadRunning(a, `${SHARDS}2\`.\`reserve_ids`)}`)
      await lost
    })
    expect(layout.shardOf(await killed.nextId(2))).toBe(2)
  })

  it('timeoutMs: a call that waits too long is a TimedOutError and its statement is killed', async () => {
    const impatient = on(a, { timeoutMs: 300 })
    await impatient.nextId(2)
    await withCounterLocked(2, async () => {
      await expect(impatient.nextIds(2, 3)).rejects.toBeInstanceOf(TimedOutError)
      // The KILL QUERY ended the statement on the server: no session still waits for the lock.
      for (;;) {
        const waiting = await rows(
          a,
          `SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND INFO NOT LIKE '%PROCESSLIST%'`,
          [`%${SHARDS}2\`.\`reserve_ids%`],
        )
        if (waiting.length === 0) break
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
    })
  })

  it('context.signal: aborting gives up at once with CancelledError and kills the statement', async () => {
    const patient = on(a, { timeoutMs: 60_000 })
    await patient.nextId(2)
    const before = new AbortController()
    before.abort()
    await expect(patient.nextId(2, { signal: before.signal })).rejects.toBeInstanceOf(
      CancelledError,
    )
    await withCounterLocked(2, async () => {
      const controller = new AbortController()
      const pending = patient.nextIds(2, 3, { signal: controller.signal })
      await threadRunning(a, `${SHARDS}2\`.\`reserve_ids`)
      controller.abort()
      await expect(pending).rejects.toBeInstanceOf(CancelledError)
    })
  })

  it('context.signal with prefetch: no ID from the buffer for an aborted signal, CancelledError when aborted mid-fetch', async () => {
    const buffered = on(a, { timeoutMs: 60_000, prefetch: { size: 20 } })
    await buffered.nextId(2) // 19 more in the buffer: not handed to an aborted caller
    await expect(buffered.nextId(2, { signal: AbortSignal.abort() })).rejects.toBeInstanceOf(
      CancelledError,
    )
    await withCounterLocked(3, async () => {
      const controller = new AbortController()
      const pending = buffered.nextIds(3, 3, { signal: controller.signal })
      await threadRunning(a, `${SHARDS}3\`.\`reserve_ids`)
      controller.abort()
      await expect(pending).rejects.toBeInstanceOf(CancelledError)
    })
    await buffered.close()
  })

  it('overload is ShardOverloadedError, a clock behind is ClockMovedBackwardsError', async () => {
    const prefix = `${PREFIX}drift_`
    await installMysql(a, { sharding, shards: [1], schemaPrefix: prefix, maxDriftMs: 10 })
    const tight = new MysqlSource({ sharding, databases: a, schemaPrefix: prefix, maxWaitMs: 0 })
    // One call for more than 10 ms of capacity (10 x 1024 IDs).
    await expect(tight.nextIds(1, 20_000)).rejects.toBeInstanceOf(ShardOverloadedError)
    const now = `FLOOR((UNIX_TIMESTAMP(SYSDATE(3)) * 1000 - ${layout.epoch}) / ${layout.timeUnitMs})`
    // A burst left the counter 5 s ahead; the clock is where it was.
    await a.query(
      `UPDATE \`${prefix}1\`.sf_counter SET v = (${now} + 5000) << 10, t = ${now} << 10`,
    )
    const overloaded = await tight.nextId(1).catch((error: unknown) => error)
    expect(overloaded).toBeInstanceOf(ShardOverloadedError)
    expect((overloaded as Error).message).not.toMatch(/fix the clock/i)
    // The server showed a time 5 s later before: its clock went back.
    await a.query(
      `UPDATE \`${prefix}1\`.sf_counter SET v = (${now} + 5000) << 10, t = (${now} + 5000) << 10`,
    )
    const behind = await tight.nextId(1).catch((error: unknown) => error)
    expect(behind).toBeInstanceOf(ClockMovedBackwardsError)
    expect((behind as ClockMovedBackwardsError).behindMs).toBeGreaterThan(1000)
  })

  it('prefetch: hands out reserved IDs from memory, unique next to other callers, ascending', async () => {
    const own = await createMysqlPool(MYSQL_URL)
    const buffered = on(own, { shards: [0, 1, 2, 3], prefetch: { size: 50, maxAgeMs: 60_000 } })
    const first = await buffered.nextId(0)
    await own.end()
    // The pool is gone: the next 49 IDs can only come from the buffer.
    const rest: bigint[] = []
    for (let i = 0; i < 49; i++) rest.push(await buffered.nextId(0))
    expect([first, ...rest].every((id, i, all) => i === 0 || id > all[i - 1]!)).toBe(true)
    await expect(buffered.nextId(0)).rejects.toThrow()

    const live = await createMysqlPool(MYSQL_URL)
    try {
      const shared = on(live, { shards: '0-3', prefetch: { size: 64 } })
      const callers = Array.from({ length: 16 }, async (_, c) => {
        const ids: bigint[] = []
        for (let i = 0; i < 100; i++) {
          if (c % 4 === 0 && i % 10 === 0) ids.push(...(await source.nextIds(0, 30)))
          else if (i % 25 === 0) ids.push(...(await shared.nextIds(0, 200)))
          else ids.push(await shared.nextId(0))
        }
        return ids
      })
      const all = (await Promise.all(callers)).flat()
      expect(new Set(all).size).toBe(all.length)
      const sequential: bigint[] = []
      for (let i = 0; i < 100; i++) {
        if (i % 30 === 0) sequential.push(...(await shared.nextIds(0, 100)))
        else sequential.push(await shared.nextId(0))
      }
      for (let i = 1; i < sequential.length; i++)
        expect(sequential[i]! > sequential[i - 1]!).toBe(true)
      await shared.close()
    } finally {
      await live.end()
    }
  })

  it('prefetch: a batch larger than the buffer fills `n + size`, capped at one 1,000,000 reserve', async () => {
    const big = on(a, { shards: [0, 1, 2, 3], prefetch: { size: 400_000, maxAgeMs: 60_000 } })
    expect(() => on(a, { prefetch: { size: 1_000_001 } })).toThrow(InvalidArgumentError)
    const ids = await big.nextIds(0, 700_000) // wants 1,100,000: reserves 1,000,000
    const { time, sequence } = layout.decompose(ids[0]!)
    const after = await counter(a, 0)
    expect(after - (BigInt(time) * 1024n + BigInt(sequence))).toBe(1_000_000n)
    const rest = await big.nextIds(0, 300_000) // the rest, from memory
    expect(await counter(a, 0)).toBe(after)
    expect(rest[0]! > ids[699_999]!).toBe(true)
    expect(new Set([...ids, ...rest]).size).toBe(1_000_000)
    await big.close()
  })

  it('stops with TimeExhaustedError at the end of the time field, issuing nothing', async () => {
    const prefix = `${PREFIX}end_`
    await installMysql(a, { sharding, shards: [1], schemaPrefix: prefix })
    const limit = BigInt(layout.timeLimit) << 10n
    await a.query(`UPDATE \`${prefix}1\`.sf_counter SET v = ${limit - 3n}`)
    const ending = new MysqlSource({ sharding, databases: a, schemaPrefix: prefix })
    await expect(ending.nextIds(1, 5)).rejects.toBeInstanceOf(TimeExhaustedError)
    expect(await counter(a, 1, prefix)).toBe(limit - 3n)
    await a.query(`DELETE FROM \`${prefix}1\`.sf_counter`)
    await expect(ending.nextId(1)).rejects.toBeInstanceOf(ConfigurationError)
  })

  it('refuses shards installed with another sharding (ShardingMismatchError naming both), per shard', async () => {
    const installedLayout = defineLayout({
      name: 'installed',
      epoch: '2000-01-01T00:00:00Z',
      timeBits: 41,
      shardBits: 11,
      sequenceBits: 12,
    })
    const installed = defineSharding({ layout: installedLayout, logicalShards: 64 })
    const prefix = `${PREFIX}other_`
    await installMysql(a, { sharding: installed, shards: [5], schemaPrefix: prefix })
    await installMysql(a, { sharding, shards: [6], schemaPrefix: prefix })
    await installMysql(a, {
      sharding: defineSharding({ layout, logicalShards: 32 }),
      shards: [7],
      schemaPrefix: prefix,
    })
    const wrong = new MysqlSource({ sharding, databases: a, shards: '5-7', schemaPrefix: prefix })
    const buffered = new MysqlSource({
      sharding,
      databases: a,
      shards: '5-7',
      schemaPrefix: prefix,
      prefetch: { size: 100 },
    })
    for (const source of [wrong, buffered, wrong]) {
      const error = await source.nextIds(5, 3).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(ShardingMismatchError)
      expect((error as Error).message).toMatch(
        /"installed" \(41\/11\/0\/12 bits.*"y2k" \(41\/13\/0\/10 bits/,
      )
      await expect(source.nextId(7)).rejects.toThrow(/logicalShards 32.*logicalShards 64/)
    }
    expect(layout.shardOf(await wrong.nextId(6))).toBe(6)
    // The installed sharding works on shard 5, and its IDs are the ones next_id() makes in SQL.
    const right = new MysqlSource({
      sharding: installed,
      databases: a,
      shards: [5],
      schemaPrefix: prefix,
    })
    const fromSource = await right.nextId(5)
    const [row] = await rows<{ id: string }>(a, `SELECT \`${prefix}5\`.next_id() AS id`)
    expect(BigInt(row!.id) > fromSource).toBe(true)
    expect(installedLayout.shardOf(fromSource)).toBe(5)
  })

  it('missing sharding metadata: ConfigurationError naming logicalShards, read again on the next call', async () => {
    const prefix = `${PREFIX}meta_`
    await installMysql(a, { sharding, shards: [1, 2], schemaPrefix: prefix })
    const meta = `\`${prefix}1\`.sf_meta`
    await a.query(`DELETE FROM ${meta} WHERE name = 'logical_shards'`)
    const checked = new MysqlSource({
      sharding,
      databases: a,
      shards: [1, 2],
      schemaPrefix: prefix,
    })
    await expect(checked.nextId(1)).rejects.toThrow(/logicalShards/)
    await expect(checked.nextId(1)).rejects.toBeInstanceOf(ConfigurationError)
    await a.query(`INSERT INTO ${meta} (name, value) VALUES ('logical_shards', '64')`)
    expect(layout.shardOf(await checked.nextId(1))).toBe(1) // read again: now it passes
    // Checked once per shard: a later change is seen by a new source.
    await a.query(`UPDATE ${meta} SET value = '63' WHERE name = 'logical_shards'`)
    expect(layout.shardOf(await checked.nextId(1))).toBe(1)
    const fresh = new MysqlSource({ sharding, databases: a, shards: [1, 2], schemaPrefix: prefix })
    await expect(fresh.nextId(1)).rejects.toBeInstanceOf(ShardingMismatchError)
    expect(layout.shardOf(await fresh.nextId(2))).toBe(2)
  })

  it('a shard in the map but not installed: ConfigurationError naming logicalShards', async () => {
    const plain = createPool()
    try {
      const uninstalled = new MysqlSource({
        sharding,
        databases: plain,
        schemaPrefix: `${PREFIX}none_`,
      })
      const error = await uninstalled.nextId(1).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(ConfigurationError)
      expect((error as Error).message).toMatch(/installMysql.*logicalShards/)
      expect((error as Error).cause).toBeDefined()
    } finally {
      await plain.end()
    }
  })
})

describe('MysqlSource across a crash of its server (kill -9, restart on the same data)', () => {
  it('every failure is a ShardflakeError; after the restart the Aria counter is repaired and IDs continue above', async () => {
    const crashing = await startMariadb()
    const pool = await createMysqlPool({ uri: crashing.url, connectionLimit: 4 })
    try {
      await installMysql(pool, { sharding, shards: [1], schemaPrefix: SHARDS })
      const crashed = new MysqlSource({
        sharding,
        databases: pool,
        schemaPrefix: SHARDS,
        timeoutMs: 1000,
      })
      const before = await crashed.nextIds(1, 5000)
      await crashing.kill()
      const failures = await Promise.all(
        Array.from({ length: 4 }, () => crashed.nextIds(1, 10).catch((error: unknown) => error)),
      )
      for (const failure of failures) {
        expect(failure).toBeInstanceOf(ShardflakeError)
        expect(['CONNECTION_LOST', 'CONNECTION_REFUSED', 'TIMED_OUT']).toContain(
          (failure as ShardflakeError).code,
        )
        expect((failure as ShardflakeError).retryable).toBe(true)
      }
      await crashing.restart()
      let after: bigint[] | undefined
      for (let attempt = 0; attempt < 20 && !after; attempt++) {
        // The pool's old connections are dead: the first calls after the restart may still fail.
        after = await crashed.nextIds(1, 5000).catch((error: unknown) => {
          expect(error).toBeInstanceOf(ShardflakeError)
          return undefined
        })
      }
      expect(after).toBeDefined()
      expect(after![0]! > before[before.length - 1]!).toBe(true)
      expect(new Set([...before, ...after!]).size).toBe(10_000)
      // Aria marked the counter table crashed; it was repaired when opened (aria_recover_options).
      const [options] = await rows<{ v: string }>(pool, 'SELECT @@aria_recover_options AS v')
      expect(options!.v).toMatch(/BACKUP|FORCE|NORMAL|QUICK/)
    } finally {
      await pool.end().catch(() => undefined)
      await crashing.stop()
    }
  })
})
