import { defineLayout, defineSharding } from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { installMysql } from '../src'
import { createPool, dropDatabases, RUN } from './helpers'

const PREFIX = `sf_my_atomm_${RUN}_`
const layout = defineLayout({
  name: 'atom',
  epoch: '2015-01-01T00:00:00Z',
  timeBits: 41,
  shardBits: 13,
  sequenceBits: 10,
})
const sharding = defineSharding({ layout, logicalShards: 64 })

const ENGINES = [
  ['mariadb SQL, Aria counter', `${PREFIX}aria_`, 'mariadb', undefined],
  ['mariadb SQL, MyISAM counter', `${PREFIX}myisam_`, 'mariadb', 'MyISAM'],
  ['mariadb SQL, InnoDB counter', `${PREFIX}innodb_`, 'mariadb', 'InnoDB'],
  ['mysql8 SQL, InnoDB counter', `${PREFIX}my8_`, 'mysql8', undefined],
] as const

let pool: Pool

beforeAll(async () => {
  pool = createPool(undefined, { connectionLimit: 24 })
  await dropDatabases(pool, PREFIX)
  for (const [, schemaPrefix, dialect, counterEngine] of ENGINES) {
    await installMysql(pool, {
      sharding,
      shards: [7],
      schemaPrefix,
      dialect,
      ...(counterEngine ? { counterEngine } : {}),
    })
  }
})

afterAll(async () => {
  await dropDatabases(pool, PREFIX)
  await pool.end()
})

/**
 * The routines alone, called straight from many connections with no client deadline in the way:
 * a counter read in one statement and written in another repeats IDs here on every engine, the
 * table-locking ones (Aria, MyISAM) included, since their table lock lasts one statement.
 */
describe.each(ENGINES)('%s: the counter under 16 connections', (_name, schemaPrefix) => {
  it('never repeats an ID from next_ids(n) and next_id() called concurrently', async () => {
    const db = `\`${schemaPrefix}7\``
    const seen: string[] = []
    await Promise.all(
      Array.from({ length: 16 }, async (_, w) => {
        const connection = await pool.getConnection()
        try {
          for (let round = 0; round < 15; round++) {
            if ((w + round) % 2 === 0) {
              const [sets] = await connection.query(`CALL ${db}.next_ids(40)`)
              for (const row of (sets as { id: string }[][])[0]!) seen.push(String(row.id))
            } else {
              const [result] = await connection.query(
                `SELECT ${db}.next_id() AS a, ${db}.next_id() AS b`,
              )
              const [row] = result as { a: string; b: string }[]
              seen.push(String(row!.a), String(row!.b))
            }
          }
        } finally {
          connection.release()
        }
      }),
    )
    expect(seen).toHaveLength(8 * 15 * 40 + 8 * 15 * 2)
    expect(new Set(seen).size).toBe(seen.length)
  })
})
