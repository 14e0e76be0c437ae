import {
  ConfigurationError,
  defineLayout,
  defineSharding,
  instagram,
  ShardingMismatchError,
  ShardOutOfRangeError,
  TimeExhaustedError,
} from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type InstallProgress, installMysql, layoutKey } from '../src'
import { createPool, dropDatabases, RUN, rows } from './helpers'

const PREFIX = `sf_my_inst_${RUN}_`
const SHARDS = `${PREFIX}s_`
const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })

let pool: Pool

beforeAll(async () => {
  pool = createPool()
  await dropDatabases(pool, PREFIX)
})

afterAll(async () => {
  await dropDatabases(pool, PREFIX)
  await pool.end()
})

async function installedDatabases(prefix: string): Promise<string[]> {
  const found = await rows<{ name: string }>(
    pool,
    'SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ? ORDER BY 1',
    [`${prefix.replace(/_/g, '\\_')}%`],
  )
  return found.map((r) => r.name)
}

describe('installMysql', () => {
  it('installs many shards with progress, detects the dialect and records the sharding', async () => {
    const progress: InstallProgress[] = []
    const result = await installMysql(pool, {
      sharding,
      shards: '0-24',
      schemaPrefix: SHARDS,
      onProgress: (p) => progress.push(p),
    })
    expect(result.dialect).toBe('mysql')
    expect(result.flavor).toBe('mariadb')
    expect(result.sharding).toEqual(sharding.toJSON())
    expect(result.shards).toEqual(Array.from({ length: 25 }, (_, i) => i))
    expect(result.created).toEqual(result.shards)
    expect(result.updated).toEqual([])
    expect(progress.map((p) => p.done)).toEqual(Array.from({ length: 25 }, (_, i) => i + 1))
    expect(progress.every((p) => p.total === 25 && p.created)).toBe(true)
    expect(await installedDatabases(SHARDS)).toHaveLength(25)
    const routines = await rows<{ name: string }>(
      pool,
      `SELECT ROUTINE_NAME AS name FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = '${SHARDS}17' ORDER BY 1`,
    )
    expect(routines.map((r) => r.name)).toEqual([
      'generate_id',
      'id_sequence',
      'id_shard',
      'id_time',
      'id_unix_ms',
      'next_id',
      'next_ids',
      'reserve_ids',
      'shard_for_key',
    ])
    const meta = await rows<{ name: string; value: string }>(
      pool,
      `SELECT name, value FROM \`${SHARDS}17\`.sf_meta ORDER BY name`,
    )
    const byName = Object.fromEntries(meta.map((m) => [m.name, m.value]))
    expect(byName.layout_key).toBe(layoutKey(instagram))
    expect(JSON.parse(byName.layout!)).toEqual(instagram.toJSON())
    expect(byName.logical_shards).toBe('2000')
    expect(byName.shard).toBe('17')
    expect(byName.dialect).toBe('mariadb')
  })

  it('is idempotent: a second run keeps every counter and reports the shards as updated', async () => {
    await pool.query(`SELECT \`${SHARDS}3\`.next_id()`)
    const [before] = await rows<{ v: string }>(pool, `SELECT v FROM \`${SHARDS}3\`.sf_counter`)
    expect(BigInt(before!.v)).toBeGreaterThan(0n)
    const result = await installMysql(pool, { sharding, shards: '0-4,30', schemaPrefix: SHARDS })
    expect(result.updated).toEqual([0, 1, 2, 3, 4])
    expect(result.created).toEqual([30])
    const [after] = await rows<{ v: string }>(pool, `SELECT v FROM \`${SHARDS}3\`.sf_counter`)
    expect(after!.v).toBe(before!.v)
    const [row] = await rows<{ id: string }>(pool, `SELECT \`${SHARDS}3\`.next_id() AS id`)
    expect(instagram.shardOf(row!.id)).toBe(3)
  })

  it('refuses another layout or another logicalShards with ShardingMismatchError, creating nothing', async () => {
    const other = defineLayout({
      name: 'other',
      epoch: '2019-01-01T00:00:00Z',
      timeBits: 41,
      shardBits: 13,
      sequenceBits: 10,
    })
    const before = await installedDatabases(SHARDS)
    for (const wrong of [
      defineSharding({ layout: other, logicalShards: 2000 }),
      defineSharding({ layout: instagram, logicalShards: 1000 }),
    ]) {
      const failure = installMysql(pool, {
        sharding: wrong,
        shards: '40-41,2',
        schemaPrefix: SHARDS,
      })
      await expect(failure).rejects.toBeInstanceOf(ShardingMismatchError)
      await expect(failure).rejects.toThrow(/logicalShards/)
    }
    expect(await installedDatabases(SHARDS)).toEqual(before)
    const [meta] = await rows<{ value: string }>(
      pool,
      `SELECT value FROM \`${SHARDS}2\`.sf_meta WHERE name = 'logical_shards'`,
    )
    expect(meta!.value).toBe('2000')
  })

  it('validates everything before creating anything', async () => {
    const prefix = `${PREFIX}v_`
    await expect(
      installMysql(pool, { shards: [1], schemaPrefix: prefix } as never),
    ).rejects.toThrow(ConfigurationError)
    await expect(
      installMysql(pool, { layout: instagram, shards: [1], schemaPrefix: prefix } as never),
    ).rejects.toThrow(/logicalShards/)
    await expect(
      installMysql(pool, { sharding, shards: '0-4000000000', schemaPrefix: prefix }),
    ).rejects.toBeInstanceOf(ShardOutOfRangeError)
    const exhausted = defineLayout({
      name: 'spent',
      epoch: '2000-01-01T00:00:00Z',
      timeBits: 30,
      shardBits: 13,
      sequenceBits: 10,
    })
    await expect(
      installMysql(pool, {
        sharding: defineSharding({ layout: exhausted, logicalShards: 8 }),
        shards: [1],
        schemaPrefix: prefix,
      }),
    ).rejects.toBeInstanceOf(TimeExhaustedError)
    expect(await installedDatabases(prefix)).toEqual([])
  })

  it('installs the mysql8 dialect too (valid on MariaDB 10.6+ as well)', async () => {
    const prefix = `${PREFIX}m8_`
    const result = await installMysql(pool, {
      sharding,
      shards: [1, 2],
      schemaPrefix: prefix,
      dialect: 'mysql8',
    })
    expect(result.flavor).toBe('mysql8')
    const [engine] = await rows<{ e: string }>(
      pool,
      `SELECT ENGINE AS e FROM information_schema.TABLES WHERE TABLE_SCHEMA = '${prefix}2' AND TABLE_NAME = 'sf_counter'`,
    )
    expect(engine!.e).toBe('InnoDB')
    const [sets] = await pool.query(`CALL \`${prefix}2\`.next_ids(3)`)
    const ids = (sets as { id: string }[][])[0]!.map((r) => BigInt(r.id))
    expect(ids.map((id) => instagram.shardOf(id))).toEqual([2, 2, 2])
  })
})
