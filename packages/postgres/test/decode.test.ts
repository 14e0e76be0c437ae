import { defineLayout, defineSharding, instagram } from '@shardflake/core'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { installPostgres } from '../src/index'
import { createDatabase, dropDatabase, raw } from './helpers'

const DB = 'sf_pg_decode'
let url: string
let pool: pg.Pool

/** An epoch 40 years ago: 2^40 ms have passed, so IDs have bit 63 set (negative BIGINT). */
const old = defineLayout({
  name: 'old',
  epoch: '1986-01-01T00:00:00Z',
  timeBits: 41,
  shardBits: 13,
  sequenceBits: 10,
  allowSignBit: true,
})

beforeAll(async () => {
  url = await createDatabase(DB)
  pool = new pg.Pool({ connectionString: url, max: 2 })
  pool.on('error', () => undefined) // terminated by DROP DATABASE ... FORCE at teardown
})
afterAll(async () => {
  await pool.end()
  await dropDatabase(DB)
})

describe('IDs made by SQL decode in TypeScript', () => {
  it.each([
    { layout: old, schema: 'sf_old', shards: [0, 3, 8191] },
    { layout: instagram, schema: 'sf_insta', shards: [0, 1341, 8191] },
  ])(
    '$layout.name: shard, time and sequence agree with the SQL helpers',
    async ({ layout, schema, shards }) => {
      const sharding = defineSharding({ layout, logicalShards: 8192 })
      await installPostgres(pool, { sharding, schema, schemaPrefix: `${schema}_s`, shards })
      for (const shard of shards) {
        // The database's clock, not this process's: an ID's time is at most marginMs (50 ms)
        // behind the clock that made it, and at most maxDriftMs (1 s) ahead.
        const clock = async () =>
          Number(
            (await raw<{ now: string }>(url, `SELECT ${schema}.now_ms()::text AS now`))[0]!.now,
          )
        const before = (await clock()) - 50
        const rows = await raw<{ id: string; shard: number; ts: Date; seq: number }>(
          url,
          `SELECT x::text AS id, ${schema}.shardflake_shard(x) AS shard, ${schema}.shardflake_timestamp(x) AS ts,
                ${schema}.shardflake_sequence(x) AS seq
           FROM ${schema}_s${shard}.next_ids(2000) x`,
        )
        const after = await clock()
        for (const row of rows) {
          const decoded = layout.decompose(row.id)
          expect(decoded.shard).toBe(shard)
          expect(row.shard).toBe(shard)
          expect(decoded.sequence).toBe(row.seq)
          expect(decoded.timestampMs).toBe(row.ts.getTime())
          expect(decoded.timestampMs).toBeGreaterThanOrEqual(before)
          expect(decoded.timestampMs).toBeLessThanOrEqual(after + 1000)
          if (layout === old) expect(BigInt(row.id) < 0n).toBe(true)
          else expect(BigInt(row.id) > 0n).toBe(true)
        }
      }
    },
  )
})
