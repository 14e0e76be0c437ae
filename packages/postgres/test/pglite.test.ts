import { PGlite } from '@electric-sql/pglite'
import {
  DirectoryChangedError,
  defineLayout,
  defineSharding,
  instagram,
  ShardHomes,
  ShardingMismatchError,
  ShardMap,
} from '@shardflake/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  defaultClause,
  installPostgres,
  movePostgresShards,
  PostgresShardDirectory,
  PostgresSource,
  postgresSql,
} from '../src/index'

const sharding = defineSharding({ layout: instagram, logicalShards: 64 })

/** The same SQL and source on embedded PostgreSQL (PGlite, WASM). */
let db: PGlite

beforeAll(async () => {
  db = new PGlite()
  await db.waitReady
})
afterAll(async () => {
  await db.close()
})

describe('PGlite', () => {
  it('installs with the installer, and refuses another layout', async () => {
    await installPostgres(db, { sharding, shards: '0-3' })
    await installPostgres(db, { sharding, shards: '0-3' })
    const other = defineLayout({
      epoch: '2024-01-01T00:00:00Z',
      timeBits: 41,
      shardBits: 13,
      sequenceBits: 10,
    })
    await expect(
      installPostgres(db, {
        sharding: defineSharding({ layout: other, logicalShards: 64 }),
        shards: [9],
      }),
    ).rejects.toBeInstanceOf(ShardingMismatchError)
    const { rows } = await db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM shardflake.shards',
    )
    expect(rows[0]!.n).toBe(4)
  })

  it('runs the generated script as is (exec)', async () => {
    await db.exec(postgresSql({ sharding, shards: [10] }).script)
    const { rows } = await db.query<{ id: string }>('SELECT shard_10.next_id()::text AS id')
    expect(instagram.shardOf(rows[0]!.id)).toBe(10)
  })

  it('gives raw INSERTs IDs through the DEFAULT, and the source batches', async () => {
    await db.exec(`CREATE TABLE posts (id bigint PRIMARY KEY ${defaultClause(2)}, body text)`)
    await db.exec(`INSERT INTO posts (body) SELECT 'x' FROM generate_series(1, 5000)`)
    const { rows } = await db.query<{ n: number; d: number; s: number }>(
      'SELECT count(*)::int AS n, count(DISTINCT id)::int AS d, max(shardflake.shardflake_shard(id)) AS s FROM posts',
    )
    expect(rows[0]).toEqual({ n: 5000, d: 5000, s: 2 })
    const source = new PostgresSource({ sharding, databases: db, prefetch: { size: 50 } })
    const batch = await source.nextIds(2, 20_000)
    const singles = await Promise.all(Array.from({ length: 100 }, () => source.nextId(1)))
    expect(new Set(batch).size).toBe(20_000)
    expect(new Set(singles).size).toBe(100)
    for (const id of singles) expect(instagram.shardOf(id)).toBe(1)
    const ids = (await db.query<{ id: string }>('SELECT id::text AS id FROM posts')).rows.map((r) =>
      BigInt(r.id),
    )
    expect(new Set([...ids, ...batch]).size).toBe(25_000)
  })

  it('moves a shard to another PGlite: the old one refuses, the new one continues above it', async () => {
    const other = new PGlite()
    try {
      const before = (
        await db.query<{ id: string }>('SELECT x::text AS id FROM shard_3.next_ids(3000) x')
      ).rows.map((r) => BigInt(r.id))
      const result = await movePostgresShards({ from: db, to: other, sharding, shards: [3] })
      const fence = result.shards[0]!.fencedAt
      await expect(db.query('SELECT shard_3.next_id()')).rejects.toMatchObject({ code: 'SF005' })
      const after = await new PostgresSource({ sharding, databases: other }).nextIds(3, 3000)
      const value = (id: bigint) => ((id >> 23n) << 10n) | (id & 1023n)
      for (const id of before) expect(value(id) <= fence).toBe(true)
      for (const id of after) expect(value(id) > fence).toBe(true)
      expect(new Set([...before, ...after]).size).toBe(6000)
    } finally {
      await other.close()
    }
  })

  it('holds a shard directory', async () => {
    const directory = new PostgresShardDirectory(db, { sharding, schema: 'homes' })
    const map = new ShardMap(sharding, [
      { from: 0, to: 31, target: 'a' },
      { from: 32, to: 63, target: 'b' },
    ])
    expect((await directory.create(map)).created).toBe(true)
    expect((await directory.create(map)).created).toBe(false)
    const homes = await ShardHomes.open({ sharding, servers: { a: 1, b: 2 }, directory })
    const moved = await directory.compareAndSet(1n, [
      { from: 0, to: 63, server: 'b', state: 'serving' },
    ])
    await expect(directory.compareAndSet(1n, moved.entries)).rejects.toBeInstanceOf(
      DirectoryChangedError,
    )
    await homes.refresh()
    expect(homes.forShard(3)).toBe(2)
    await homes.close()
  })
})
