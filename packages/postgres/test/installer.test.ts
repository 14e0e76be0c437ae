import {
  ConfigurationError,
  defineLayout,
  defineSharding,
  instagram,
  ShardingMismatchError,
} from '@shardflake/core'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type InstallProgress,
  installPostgres,
  readInstalledSharding,
  readInstalledShards,
  setDefault,
} from '../src/index'
import { createDatabase, dropDatabase, raw, sharding } from './helpers'

const DB = 'sf_pg_install'
let url: string
let pool: pg.Pool

beforeAll(async () => {
  url = await createDatabase(DB)
  pool = new pg.Pool({ connectionString: url, max: 4 })
  pool.on('error', () => undefined) // terminated by DROP DATABASE ... FORCE at teardown
})
afterAll(async () => {
  await pool.end()
  await dropDatabase(DB)
})

describe('installPostgres', () => {
  it('installs many shards with progress, records them, and is idempotent', async () => {
    const progress: InstallProgress[] = []
    const result = await installPostgres(pool, {
      sharding,
      shards: '0-119',
      shardsPerTransaction: 50,
      onProgress: (p) => progress.push(p),
    })
    expect(result.shards).toHaveLength(120)
    expect(progress).toHaveLength(120)
    expect(progress[0]).toEqual({ done: 1, total: 120, shard: 0 })
    expect(progress.at(-1)).toEqual({ done: 120, total: 120, shard: 119 })
    const [before] = await raw<{ id: string }>(url, 'SELECT shard_42.next_id()::text AS id')
    await installPostgres(pool, { sharding, shards: '0-119' })
    const [after] = await raw<{ id: string }>(url, 'SELECT shard_42.next_id()::text AS id')
    expect(BigInt(after!.id) > BigInt(before!.id)).toBe(true)
    const [schemas] = await raw<{ n: string }>(
      url,
      `SELECT count(*)::text AS n FROM pg_namespace WHERE nspname ~ '^shard_[0-9]+$'`,
    )
    expect(schemas!.n).toBe('120')
    const [meta] = await raw<{ n: string; epoch: string }>(
      url,
      'SELECT (SELECT count(*) FROM shardflake.shards)::text AS n, epoch_ms::text AS epoch FROM shardflake.layout',
    )
    expect(meta).toEqual({ n: '120', epoch: String(instagram.epoch) })
    expect((await readInstalledSharding(pool))?.equals(sharding)).toBe(true)
    expect(await readInstalledShards(pool)).toHaveLength(120)
  })

  it('refuses another logicalShards over the installed one, changing nothing', async () => {
    const error = await installPostgres(pool, {
      sharding: defineSharding({ layout: instagram, logicalShards: 4000 }),
      shards: [500],
    }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ShardingMismatchError)
    expect((error as Error).message).toMatch(
      /with logicalShards 2000, but .* with logicalShards 4000/,
    )
    const [row] = await raw<{ present: boolean; logical: number }>(
      url,
      `SELECT to_regnamespace('shard_500') IS NOT NULL AS present, (SELECT logical_shards FROM shardflake.layout) AS logical`,
    )
    expect(row).toEqual({ present: false, logical: 2000 })
  })

  it('refuses a different layout over the installed one, changing nothing', async () => {
    const other = defineLayout({
      name: 'other',
      epoch: '2024-01-01T00:00:00Z',
      timeBits: 41,
      shardBits: 13,
      sequenceBits: 10,
    })
    const error = await installPostgres(pool, {
      sharding: defineSharding({ layout: other, logicalShards: 2000 }),
      shards: [500],
    }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ShardingMismatchError)
    expect((error as Error).message).toMatch(
      /database "sf_pg_install_\w+" uses layout "instagram".*this application uses layout "other"/,
    )
    const [present] = await raw<{ present: boolean }>(
      url,
      `SELECT to_regnamespace('shard_500') IS NOT NULL AS present`,
    )
    expect(present!.present).toBe(false)
  })

  it('refuses a shard already installed under another schema name', async () => {
    const error = await installPostgres(pool, {
      sharding,
      shards: [3],
      schemaPrefix: 'other_',
    }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ConfigurationError)
    expect((error as Error).message).toMatch(/already installed in schema shard_3/)
  })

  it('adds DEFAULT next_id() to an existing table; raw INSERTs then get IDs of the shard', async () => {
    await raw(url, 'CREATE TABLE public.posts (id bigint PRIMARY KEY, body text)')
    await setDefault(pool, { table: 'public.posts', shard: 17 })
    await raw(url, `INSERT INTO public.posts (body) SELECT 'x' FROM generate_series(1, 500)`)
    const rows = await raw<{ id: string }>(url, 'SELECT id::text AS id FROM public.posts')
    expect(new Set(rows.map((r) => r.id)).size).toBe(500)
    for (const row of rows) expect(instagram.shardOf(row.id)).toBe(17)
  })
})
