import {
  ConfigurationError,
  defineLayout,
  InvalidArgumentError,
  LayoutMismatchError,
  ShardMap,
  ShardOutOfRangeError,
  TimeExhaustedError,
} from '@shardflake/core'
import mysql, { type Pool } from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createMysqlPool, installMysqlShards, MysqlSource } from '../src'
import {
  createPool,
  dropDatabases,
  type ExtraServer,
  MYSQL_URL,
  rows,
  startMariadb,
} from './helpers'

const PREFIX = 'sf_my_src_'
const SHARDS = `${PREFIX}shard_`
// An old epoch: every ID is far above 2^53.
const layout = defineLayout({
  name: 'y2k',
  epoch: '2000-01-01T00:00:00Z',
  timeBits: 41,
  shardBits: 13,
  sequenceBits: 10,
})

let a: Pool
let b: Pool
let second: ExtraServer
let source: MysqlSource

beforeAll(async () => {
  second = await startMariadb()
  a = await createMysqlPool(MYSQL_URL)
  b = await createMysqlPool(second.url)
  await dropDatabases(a, PREFIX)
  await installMysqlShards(a, { layout, shards: [0, 1, 2, 3], schemaPrefix: SHARDS })
  await installMysqlShards(b, { layout, shards: [4, 5, 6, 7], schemaPrefix: SHARDS })
  source = new MysqlSource({
    layout,
    schemaPrefix: SHARDS,
    shardMap: new ShardMap(layout, [
      { from: 0, to: 3, target: a },
      { from: 4, to: 7, target: b },
    ]),
  })
})

afterAll(async () => {
  await dropDatabases(a, PREFIX)
  await a.end()
  await b.end()
  await second.stop()
})

async function counter(pool: Pool, shard: number): Promise<bigint> {
  const [row] = await rows<{ v: string }>(pool, `SELECT v FROM \`${SHARDS}${shard}\`.sf_counter`)
  return BigInt(row!.v)
}

describe('MysqlSource', () => {
  it('routes each logical shard to its server with the shard map', async () => {
    const beforeA = await counter(a, 2)
    const beforeB = await counter(b, 6)
    const onA = await source.nextIds(2, 100)
    const onB = await source.nextIds(6, 100)
    expect(await counter(a, 2)).toBeGreaterThan(beforeA)
    expect(await counter(b, 6)).toBeGreaterThan(beforeB)
    const [missing] = await rows<{ n: string }>(
      a,
      `SELECT COUNT(*) AS n FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '${SHARDS}6'`,
    )
    expect(Number(missing!.n)).toBe(0)
    expect(onA.every((id) => layout.shardOf(id) === 2)).toBe(true)
    expect(onB.every((id) => layout.shardOf(id) === 6)).toBe(true)
  })

  it('IDs above 2^53 arrive exact: as in the database, never through a number', async () => {
    const ids = await source.nextIds(1, 50)
    expect(ids[0]! > 2n ** 53n).toBe(true)
    await a.query(`CREATE DATABASE IF NOT EXISTS \`${PREFIX}rows\``)
    await a.query(`CREATE TABLE \`${PREFIX}rows\`.t (id BIGINT PRIMARY KEY)`)
    await a.query(`INSERT INTO \`${PREFIX}rows\`.t (id) VALUES ?`, [
      ids.map((id) => [id.toString()]),
    ])
    const stored = await rows<{ id: string; text: string }>(
      a,
      `SELECT id, CAST(id AS CHAR) AS text FROM \`${PREFIX}rows\`.t ORDER BY id`,
    )
    expect(stored.map((r) => r.text)).toEqual(ids.map(String))
    expect(stored.map((r) => r.id)).toEqual(ids.map(String))
    // A pool that would hand BIGINTs back as numbers is refused.
    const lossy = mysql.createPool({ uri: MYSQL_URL })
    try {
      expect(() => new MysqlSource({ layout, pool: lossy, schemaPrefix: SHARDS })).toThrow(
        ConfigurationError,
      )
    } finally {
      await lossy.end()
    }
  })

  it('a batch is exactly the counter values one UPDATE reserved, across millisecond borders', async () => {
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

  it('refuses shards outside its map and counts that are not positive integers', async () => {
    await expect(source.nextId(8)).rejects.toBeInstanceOf(ShardOutOfRangeError)
    await expect(source.nextId(-1)).rejects.toBeInstanceOf(ShardOutOfRangeError)
    await expect(source.nextIds(1, 0)).rejects.toBeInstanceOf(InvalidArgumentError)
    await expect(source.nextIds(1, 1_000_001)).rejects.toBeInstanceOf(InvalidArgumentError)
    for (const logicalShards of [0, 8193, 1.5]) {
      expect(
        () => new MysqlSource({ layout, pool: a, schemaPrefix: SHARDS, logicalShards }),
      ).toThrow(ConfigurationError)
    }
  })

  it('prefetch: hands out reserved IDs from memory, unique next to other callers, ascending', async () => {
    const own = await createMysqlPool(MYSQL_URL)
    const buffered = new MysqlSource({
      layout,
      pool: own,
      schemaPrefix: SHARDS,
      shards: [0, 1, 2, 3],
      prefetch: { size: 50, maxAgeMs: 60_000 },
    })
    const first = await buffered.nextId(0)
    await own.end()
    // The pool is gone: the next 49 IDs can only come from the buffer.
    const rest: bigint[] = []
    for (let i = 0; i < 49; i++) rest.push(await buffered.nextId(0))
    expect([first, ...rest].every((id, i, all) => i === 0 || id > all[i - 1]!)).toBe(true)
    await expect(buffered.nextId(0)).rejects.toThrow()

    const live = await createMysqlPool(MYSQL_URL)
    try {
      const shared = new MysqlSource({
        layout,
        pool: live,
        schemaPrefix: SHARDS,
        shards: [0, 1, 2, 3],
        prefetch: { size: 64 },
      })
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
    const big = new MysqlSource({
      layout,
      pool: a,
      schemaPrefix: SHARDS,
      shards: [0, 1, 2, 3],
      prefetch: { size: 400_000, maxAgeMs: 60_000 },
    })
    expect(
      () =>
        new MysqlSource({ layout, pool: a, schemaPrefix: SHARDS, prefetch: { size: 1_000_001 } }),
    ).toThrow(ConfigurationError)
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

  it('stops with TimeExhaustedError once the layout time field is used up, issuing nothing', async () => {
    const short = defineLayout({
      name: 'short',
      epoch: '2020-01-01T00:00:00Z',
      timeBits: 20,
      shardBits: 13,
      sequenceBits: 10,
    })
    await installMysqlShards(a, { layout: short, shards: [1], schemaPrefix: `${PREFIX}short_` })
    const expired = new MysqlSource({ layout: short, pool: a, schemaPrefix: `${PREFIX}short_` })
    await expect(expired.nextId(1)).rejects.toBeInstanceOf(TimeExhaustedError)
    const [row] = await rows<{ v: string }>(a, `SELECT v FROM \`${PREFIX}short_1\`.sf_counter`)
    expect(row!.v).toBe('0')
    await a.query(`DELETE FROM \`${PREFIX}short_1\`.sf_counter`)
    await expect(expired.nextId(1)).rejects.toBeInstanceOf(ConfigurationError)
  })

  it('refuses shards installed with another layout (LayoutMismatchError naming both), per shard', async () => {
    const installed = defineLayout({
      name: 'installed',
      epoch: '2000-01-01T00:00:00Z',
      timeBits: 41,
      shardBits: 11,
      sequenceBits: 12,
    })
    const prefix = `${PREFIX}other_`
    await installMysqlShards(a, { layout: installed, shards: [5], schemaPrefix: prefix })
    await installMysqlShards(a, { layout, shards: [6], schemaPrefix: prefix })
    const wrong = new MysqlSource({ layout, pool: a, shards: [5, 6], schemaPrefix: prefix })
    const buffered = new MysqlSource({
      layout,
      pool: a,
      shards: [5, 6],
      schemaPrefix: prefix,
      prefetch: { size: 100 },
    })
    for (const source of [wrong, buffered, wrong]) {
      const error = await source.nextIds(5, 3).then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(error).toBeInstanceOf(LayoutMismatchError)
      expect((error as Error).message).toMatch(
        /made for layout "y2k" .*41\/13\/0\/10 bits.*installed with layout "installed" .*41\/11\/0\/12 bits/,
      )
      await expect(source.nextId(5)).rejects.toBeInstanceOf(LayoutMismatchError)
    }
    // The shard with this layout, on the same server, works.
    const ids = await wrong.nextIds(6, 3)
    expect(ids.every((id) => id > 0n && layout.shardOf(id) === 6)).toBe(true)
    // The installed layout works on shard 5, and its IDs are the ones next_id() makes in SQL.
    const right = new MysqlSource({ layout: installed, pool: a, shards: [5], schemaPrefix: prefix })
    const fromSource = await right.nextId(5)
    const [row] = await rows<{ id: string }>(a, `SELECT \`${prefix}5\`.next_id() AS id`)
    const fromSql = BigInt(row!.id)
    expect(fromSql > fromSource).toBe(true)
    expect(installed.shardOf(fromSql)).toBe(5)
    expect(installed.shardOf(fromSource)).toBe(5)
    const age = Date.now() - installed.timeOf(fromSource).getTime()
    expect(age > -60_000 && age < 60_000).toBe(true) // today, not in 2072
  })

  it('missing layout metadata: ConfigurationError, read again on the next call; a good read is kept', async () => {
    const prefix = `${PREFIX}meta_`
    await installMysqlShards(a, { layout, shards: [1, 2], schemaPrefix: prefix })
    const meta = `\`${prefix}1\`.sf_meta`
    const [saved] = await rows<{ value: string }>(
      a,
      `SELECT value FROM ${meta} WHERE name = 'layout_key'`,
    )
    await a.query(`DELETE FROM ${meta} WHERE name = 'layout_key'`)
    const source = new MysqlSource({ layout, pool: a, shards: [1, 2], schemaPrefix: prefix })
    await expect(source.nextId(1)).rejects.toThrow(/records no layout/)
    await expect(source.nextId(1)).rejects.toBeInstanceOf(ConfigurationError)
    await a.query(`INSERT INTO ${meta} (name, value) VALUES ('layout_key', ?)`, [saved!.value])
    expect(layout.shardOf(await source.nextId(1))).toBe(1) // read again: now it passes
    // Checked once per shard: a later change is not seen by this source, but by a new one.
    await a.query(
      `UPDATE ${meta} SET value = 'epoch=0;unit=1;bits=1/1/1/1;order=x' WHERE name = 'layout_key'`,
    )
    expect(layout.shardOf(await source.nextId(1))).toBe(1)
    const fresh = new MysqlSource({ layout, pool: a, shards: [1, 2], schemaPrefix: prefix })
    await expect(fresh.nextId(1)).rejects.toBeInstanceOf(LayoutMismatchError)
    expect(layout.shardOf(await fresh.nextId(2))).toBe(2) // each shard on its own
    // No sf_meta table at all: ConfigurationError too.
    await a.query(`DROP TABLE \`${prefix}2\`.sf_meta`)
    const bare = new MysqlSource({ layout, pool: a, shards: [1, 2], schemaPrefix: prefix })
    await expect(bare.nextId(2)).rejects.toBeInstanceOf(ConfigurationError)
  })

  it('reports a shard that is in the map but not installed', async () => {
    const plain = createPool()
    try {
      const uninstalled = new MysqlSource({ layout, pool: plain, schemaPrefix: `${PREFIX}none_` })
      await expect(uninstalled.nextId(1)).rejects.toBeInstanceOf(ConfigurationError)
    } finally {
      await plain.end()
    }
  })
})
