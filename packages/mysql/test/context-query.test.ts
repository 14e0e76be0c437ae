import { defineLayout, type IdRequestContext } from '@shardflake/core'
import type { Pool, PoolConnection } from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createMysqlPool, installMysqlShards, MysqlSource } from '../src'
import { dropDatabases, MYSQL_URL, rows } from './helpers'

const PREFIX = 'sf_my_ctx_'
const ARIA = `${PREFIX}aria_`
const INNO = `${PREFIX}inno_`
const layout = defineLayout({
  name: 'y2k',
  epoch: '2000-01-01T00:00:00Z',
  timeBits: 41,
  shardBits: 13,
  sequenceBits: 10,
})

let pool: Pool

beforeAll(async () => {
  pool = await createMysqlPool(MYSQL_URL)
  await dropDatabases(pool, PREFIX)
  await installMysqlShards(pool, { layout, shards: [1, 2], schemaPrefix: ARIA })
  await installMysqlShards(pool, {
    layout,
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
    const [[now]] = (await connection.query(
      'SELECT CAST(FLOOR(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS CHAR) AS ms',
    )) as unknown as [{ ms: string }[]]
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

const counterValue = (id: bigint) => {
  const { time, sequence } = layout.decompose(id)
  return BigInt(time) * 1024n + BigInt(sequence)
}

describe('MysqlSource useContextQuery', () => {
  it('is off by default: the caller connection is not used', async () => {
    const source = new MysqlSource({ layout, pool, schemaPrefix: ARIA })
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

  it('InnoDB counter: reserves inside the caller transaction, locks the row until it ends, and a rollback gives the IDs back', async () => {
    const source = new MysqlSource({ layout, pool, schemaPrefix: INNO, useContextQuery: true })
    await source.nextIds(1, 3) // the counter now runs with the clock
    const before = await counter(INNO, 1)

    const first = await transaction({ prefix: INNO, shard: 1 })
    const ids = await source.nextIds(1, 10, first.context)
    expect(first.calls).toHaveLength(1)
    expect(counterValue(ids[0]!)).toBe(before)
    // Not committed: other sessions still read the old value ...
    expect(await counter(INNO, 1)).toBe(before)
    // ... and cannot reserve on this shard until the caller's transaction ends.
    const other = await pool.getConnection()
    try {
      await other.query('SET SESSION innodb_lock_wait_timeout = 1')
      await expect(other.query(`SELECT \`${INNO}1\`.reserve_ids(1)`)).rejects.toMatchObject({
        code: 'ER_LOCK_WAIT_TIMEOUT',
      })
    } finally {
      other.release()
    }
    await first.connection.rollback()
    first.connection.release()
    expect(await counter(INNO, 1)).toBe(before)

    // The rolled-back IDs are issued again: a caller must drop them with its rolled-back rows.
    const second = await transaction({ prefix: INNO, shard: 1 })
    try {
      const again = await source.nextIds(1, 10, second.context)
      expect(again).toEqual(ids)
      await second.connection.commit()
    } finally {
      second.connection.release()
    }
    expect(await counter(INNO, 1)).toBe(before + 10n)
  })

  it('Aria counter (MariaDB default): the reserve is not part of the transaction, nothing is given back', async () => {
    const source = new MysqlSource({ layout, pool, schemaPrefix: ARIA, useContextQuery: true })
    await source.nextIds(2, 3)
    const before = await counter(ARIA, 2)
    const first = await transaction({ prefix: ARIA, shard: 2 })
    const ids = await source.nextIds(2, 10, first.context)
    expect(first.calls).toHaveLength(1)
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

  it('a function picks the shards; calls through the caller connection skip the prefetch buffer', async () => {
    const source = new MysqlSource({
      layout,
      pool,
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
      expect(calls).toHaveLength(1)
      expect(counterValue(viaCaller[6]!) + 1n).toBe(await counter(ARIA, 1)) // exactly 7 reserved
      await source.nextIds(1, 1, context)
      expect(calls).toHaveLength(2)
      await source.nextIds(1, 1) // no context: the pool and the buffer
      expect(calls).toHaveLength(2)
    } finally {
      await connection.rollback()
      connection.release()
      await source.close()
    }
  })
})
