import {
  ConfigurationError,
  defineLayout,
  defineSharding,
  type IdRequestContext,
  ShardingMismatchError,
} from '@shardflake/core'
import type { Pool, PoolConnection, RowDataPacket } from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createMysqlPool, installMysql, MysqlSource } from '../src'
import { dropDatabases, MYSQL_URL, RUN, rows } from './helpers'

const PREFIX = `sf_my_ctx_${RUN}_`
const ARIA = `${PREFIX}aria_`
const INNO = `${PREFIX}inno_`
const MYISAM = `${PREFIX}myisam_`
const layout = defineLayout({
  name: 'y2k',
  epoch: '2000-01-01T00:00:00Z',
  timeBits: 41,
  shardBits: 13,
  sequenceBits: 10,
})
const sharding = defineSharding({ layout, logicalShards: 64 })

let pool: Pool

beforeAll(async () => {
  pool = await createMysqlPool(MYSQL_URL)
  await dropDatabases(pool, PREFIX)
  await installMysql(pool, { sharding, shards: [1, 2], schemaPrefix: ARIA })
  await installMysql(pool, {
    sharding,
    shards: [1, 2],
    schemaPrefix: INNO,
    counterEngine: 'InnoDB',
  })
})

afterAll(async () => {
  await dropDatabases(pool, PREFIX)
  await pool.end()
})

async function counter(prefix: string, shard: number): Promise<bigint> {
  const [row] = await rows<{ v: string }>(pool, `SELECT v FROM \`${prefix}${shard}\`.sf_counter`)
  return BigInt(row!.v)
}

/** A connection in a transaction, seen as an ORM's `context.query`, with its calls counted. */
async function transaction(behind?: { prefix: string; shard: number }): Promise<{
  connection: PoolConnection
  context: IdRequestContext
  calls: string[]
}> {
  const connection = await pool.getConnection()
  if (behind) {
    // This session's clock 300 ms behind the counter (within maxDriftMs): the reserved block
    // then starts exactly at the counter's value.
    const v = await counter(behind.prefix, behind.shard)
    const [[now]] = await connection.query<RowDataPacket[]>(
      'SELECT CAST(FLOOR(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS CHAR) AS ms',
    )
    const offset = layout.epoch + Number(v >> 10n) - 300 - Number(now!.ms)
    await connection.query('SET @shardflake_clock_offset_ms = ?', [offset])
  }
  await connection.beginTransaction()
  const calls: string[] = []
  const context: IdRequestContext = {
    query: async (sql, params) => {
      calls.push(sql)
      const [result] = await connection.query(sql, params as unknown[])
      return result as Record<string, unknown>[]
    },
  }
  return { connection, context, calls }
}

/** The calls that reserved counter values (the first call per shard also reads its metadata). */
const reserves = (calls: readonly string[]) => calls.filter((sql) => sql.includes('reserve_ids'))

const counterValue = (id: bigint) => {
  const { time, sequence } = layout.decompose(id)
  return BigInt(time) * 1024n + BigInt(sequence)
}

describe('MysqlSource useContextQuery', () => {
  it('is off by default: the caller connection is not used', async () => {
    const source = new MysqlSource({ sharding, databases: pool, schemaPrefix: ARIA })
    const { connection, context, calls } = await transaction()
    try {
      const ids = await source.nextIds(1, 5, context)
      expect(ids).toHaveLength(5)
      expect(calls).toEqual([])
    } finally {
      await connection.rollback()
      connection.release()
    }
  })

  it('InnoDB counter: refused before anything is reserved on the caller connection', async () => {
    // Why: inside the caller's transaction a rollback gives InnoDB counter values back, and
    // they are issued again (raw SQL here; an ORM keeps the rolled-back ID on its entity).
    await pool.query(`SELECT \`${INNO}2\`.reserve_ids(1)`) // the counter runs with the clock
    const raw = await transaction({ prefix: INNO, shard: 2 })
    const reserve = async () => {
      const [[row]] = await raw.connection.query<RowDataPacket[]>(
        `SELECT CAST(\`${INNO}2\`.reserve_ids(5) AS CHAR) AS v`,
      )
      return String(row!.v)
    }
    try {
      const given = await reserve()
      await raw.connection.rollback()
      expect(await reserve()).toBe(given)
    } finally {
      raw.connection.release()
    }

    const source = new MysqlSource({
      sharding,
      databases: pool,
      schemaPrefix: INNO,
      useContextQuery: true,
    })
    const before = await counter(INNO, 1)
    for (let attempt = 0; attempt < 2; attempt++) {
      const { connection, context, calls } = await transaction()
      try {
        await expect(source.nextIds(1, 10, context)).rejects.toThrow(
          /transactional table .*engine InnoDB.*Nothing was reserved/,
        )
        await expect(source.nextId(1, context)).rejects.toBeInstanceOf(ConfigurationError)
        expect(reserves(calls)).toEqual([]) // nothing was reserved on the caller's connection
      } finally {
        await connection.rollback()
        connection.release()
      }
    }
    expect(await counter(INNO, 1)).toBe(before)
    // Without a caller connection, or for shards the option leaves out, the pool is used.
    const ids = await source.nextIds(1, 3)
    expect(counterValue(ids[2]!) + 1n).toBe(await counter(INNO, 1))
    const some = new MysqlSource({
      sharding,
      databases: pool,
      schemaPrefix: INNO,
      useContextQuery: (shard) => shard === 2,
    })
    const { connection, context, calls } = await transaction()
    try {
      expect(await some.nextIds(1, 3, context)).toHaveLength(3)
      expect(calls).toEqual([])
      await expect(some.nextIds(2, 3, context)).rejects.toBeInstanceOf(ConfigurationError)
      expect(reserves(calls)).toEqual([])
    } finally {
      await connection.rollback()
      connection.release()
    }
  })

  it('accepts a counter altered to a non-transactional engine (read again after a refusal)', async () => {
    const source = new MysqlSource({
      sharding,
      databases: pool,
      schemaPrefix: INNO,
      useContextQuery: true,
    })
    const first = await transaction()
    try {
      await expect(source.nextIds(2, 4, first.context)).rejects.toBeInstanceOf(ConfigurationError)
    } finally {
      await first.connection.rollback()
      first.connection.release()
    }
    await pool.query(`ALTER TABLE \`${INNO}2\`.sf_counter ENGINE=Aria TRANSACTIONAL=0`)
    const before = await counter(INNO, 2)
    const second = await transaction({ prefix: INNO, shard: 2 })
    try {
      const ids = await source.nextIds(2, 4, second.context)
      expect(reserves(second.calls)).toHaveLength(1)
      expect(counterValue(ids[0]!)).toBe(before)
    } finally {
      await second.connection.rollback()
      second.connection.release()
    }
    expect(await counter(INNO, 2)).toBe(before + 4n) // kept through the rollback
  })

  it('MyISAM counter: accepted, the rollback keeps the counter', async () => {
    await installMysql(pool, {
      sharding,
      shards: [3],
      schemaPrefix: MYISAM,
      counterEngine: 'MyISAM',
    })
    const source = new MysqlSource({
      sharding,
      databases: pool,
      schemaPrefix: MYISAM,
      useContextQuery: true,
    })
    await source.nextIds(3, 1)
    const before = await counter(MYISAM, 3)
    const { connection, context, calls } = await transaction()
    try {
      const ids = await source.nextIds(3, 6, context)
      expect(reserves(calls)).toHaveLength(1)
      expect(counterValue(ids[0]!) >= before).toBe(true)
    } finally {
      await connection.rollback()
      connection.release()
    }
    const after = await source.nextIds(3, 1)
    expect(counterValue(after[0]!) >= before + 6n).toBe(true)
  })

  it('another layout installed: ShardingMismatchError, nothing reserved on the caller connection', async () => {
    const other = defineLayout({
      name: 'other',
      epoch: '2000-01-01T00:00:00Z',
      timeBits: 41,
      shardBits: 11,
      sequenceBits: 12,
    })
    const source = new MysqlSource({
      sharding: defineSharding({ layout: other, logicalShards: 64 }),
      databases: pool,
      schemaPrefix: ARIA,
      useContextQuery: true,
    })
    const before = await counter(ARIA, 1)
    const { connection, context, calls } = await transaction()
    try {
      await expect(source.nextIds(1, 5, context)).rejects.toBeInstanceOf(ShardingMismatchError)
      expect(calls).toHaveLength(1) // the check, and no reserve
      expect(reserves(calls)).toEqual([])
    } finally {
      await connection.rollback()
      connection.release()
    }
    expect(await counter(ARIA, 1)).toBe(before)
  })

  it('Aria counter (MariaDB default): the reserve is not part of the transaction, nothing is given back', async () => {
    const source = new MysqlSource({
      sharding,
      databases: pool,
      schemaPrefix: ARIA,
      useContextQuery: true,
    })
    await source.nextIds(2, 3)
    const before = await counter(ARIA, 2)
    const first = await transaction({ prefix: ARIA, shard: 2 })
    const ids = await source.nextIds(2, 10, first.context)
    expect(reserves(first.calls)).toHaveLength(1)
    expect(counterValue(ids[0]!)).toBe(before)
    expect(await counter(ARIA, 2)).toBe(before + 10n) // visible before the commit
    const [other] = await rows<{ v: string }>(
      pool,
      `SELECT CAST(\`${ARIA}2\`.reserve_ids(1) AS CHAR) AS v`,
    ) // no lock wait
    expect(BigInt(other!.v) >= before + 10n).toBe(true)
    await first.connection.rollback()
    first.connection.release()
    const after = await source.nextIds(2, 1)
    expect(after[0]! > ids[9]!).toBe(true)
  })

  it('needs no second connection: a pool of one, held by the caller transaction, does not starve it', async () => {
    const single = await createMysqlPool({ uri: MYSQL_URL, connectionLimit: 1 })
    const held = await single.getConnection()
    try {
      await held.beginTransaction()
      const source = new MysqlSource({
        sharding,
        databases: single,
        schemaPrefix: ARIA,
        shards: [1, 2],
        useContextQuery: true,
      })
      const calls: string[] = []
      const context: IdRequestContext = {
        query: async (sql, params) => {
          calls.push(sql)
          const [result] = await held.query(sql, params as unknown[])
          return result as Record<string, unknown>[]
        },
      }
      const before = await counter(ARIA, 1)
      const ids = await source.nextIds(1, 5, context) // first use of the shard: check + reserve
      expect(calls).toHaveLength(2)
      expect(layout.shardOf(ids[0]!)).toBe(1)
      expect(counterValue(ids[0]!) >= before).toBe(true)
      await held.rollback()
    } finally {
      held.release()
      await single.end()
    }
  })

  it('a function picks the shards; calls through the caller connection skip the prefetch buffer', async () => {
    const source = new MysqlSource({
      sharding,
      databases: pool,
      schemaPrefix: ARIA,
      useContextQuery: (shard) => shard === 1,
      prefetch: { size: 100, maxAgeMs: 60_000 },
    })
    const { connection, context, calls } = await transaction()
    try {
      const buffered = await source.nextIds(2, 5, context) // shard 2: pool, buffer of 100
      expect(calls).toEqual([])
      const before2 = await counter(ARIA, 2)
      expect(before2 - counterValue(buffered[0]!)).toBe(100n)
      const fromBuffer = await source.nextIds(2, 5, context)
      expect(fromBuffer[0]! > buffered[4]!).toBe(true)
      expect(await counter(ARIA, 2)).toBe(before2) // served from memory

      const viaCaller = await source.nextIds(1, 7, context) // shard 1: the caller's connection
      // Its first use: the check, then the reserve (tried again, after 1, 2, 4 ... ms, while the
      // counter is ahead of the clock: a loaded machine can leave it there).
      const checks = () => calls.filter((sql) => !sql.includes('reserve_ids'))
      expect(checks()).toHaveLength(1)
      expect(reserves(calls).length).toBeGreaterThanOrEqual(1)
      expect(counterValue(viaCaller[6]!) + 1n).toBe(await counter(ARIA, 1)) // exactly 7 reserved
      const reservedBefore = reserves(calls).length
      await source.nextIds(1, 1, context)
      expect(checks()).toHaveLength(1) // checked once per shard
      expect(reserves(calls).length).toBeGreaterThan(reservedBefore)
      const callsBefore = calls.length
      await source.nextIds(1, 1) // no context: the pool and the buffer
      expect(calls).toHaveLength(callsBefore)
    } finally {
      await connection.rollback()
      connection.release()
      await source.close()
    }
  })
})
